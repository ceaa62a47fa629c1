"""RoI heads: box classification/regression and masks, inference and losses.

Inference, torchvision's per-image rules run on the whole batch at once:
softmax class scores, per-class decoded boxes clipped to their image,
background dropped, scores ``> score_threshold``, tiny boxes dropped,
class-aware NMS (one call: image and class form the group), the
``detections_per_image`` best of each image; then the mask head runs on the
kept boxes and each box keeps the mask of its class. Nothing loops over
images, classes or boxes, and the only host syncs are the two that size
the work (how many candidates pass the threshold, how many NMS keeps).
Training: proposals plus ground-truth boxes are matched and sampled
(``batch_size_per_image``, ``positive_fraction``), and the classification,
box and mask losses are computed on the samples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from streamseg import ops
from streamseg.models.maskrcnn.nms import clip_per_image, first_per_group
from streamseg.models.maskrcnn.rpn import Proposals
from streamseg.models.maskrcnn.sampling import BACKGROUND, IGNORE, UNUSED, match, sample_labels

__all__ = ["BatchDetections", "RoIHeads", "RoISettings"]

BOX_WEIGHTS = (10.0, 10.0, 5.0, 5.0)


@dataclasses.dataclass
class BatchDetections:
    """The detections of a batch, the same number of slots ``K`` for every image.

    Attributes:
        boxes: ``(B, K, 4)`` float xyxy resized-image pixels.
        scores: ``(B, K)`` float class scores.
        labels: ``(B, K)`` int64 classes (``>= 1``).
        filled: ``(B, K)`` bool: which slots hold a detection; an image's
            come first, best first (with ``drop_empty`` a dropped one
            leaves a hole).
        mask_probs: ``(R, M, M)`` float in ``[0, 1]``: the masks of the
            filled slots in row-major order, then ``R - filled.sum()``
            rows of padding.
    """

    boxes: Tensor
    scores: Tensor
    labels: Tensor
    filled: Tensor
    mask_probs: Tensor

    @classmethod
    def empty(cls, images: int, slots: int, mask_size: int, like: Tensor) -> BatchDetections:
        """No detection in any of ``images`` images."""
        return cls(
            boxes=like.new_zeros((images, slots, 4)),
            scores=like.new_zeros((images, slots)),
            labels=torch.ones((images, slots), dtype=torch.int64, device=like.device),
            filled=torch.zeros((images, slots), dtype=torch.bool, device=like.device),
            mask_probs=like.new_zeros((0, mask_size, mask_size)),
        )

    def per_image(self) -> list[dict[str, Tensor]]:
        """``boxes``, ``scores``, ``labels``, ``mask_probs`` of each image (host syncs)."""
        counts = self.filled.sum(dim=1).tolist()
        masks = self.mask_probs[: sum(counts)].split(counts)
        return [
            {"boxes": b[f], "scores": s[f], "labels": lab[f], "mask_probs": m}
            for b, s, lab, f, m in zip(
                self.boxes, self.scores, self.labels, self.filled, masks, strict=True
            )
        ]


@dataclasses.dataclass(frozen=True)
class RoISettings:
    """Thresholds and sizes of the RoI heads.

    ``sampling_ratio`` and ``aligned`` are RoIAlign's (for the box and mask
    features and the mask targets); ``min_box_size`` drops narrower or
    shorter detections before NMS, ``drop_empty`` drops zero-width or
    zero-height ones after it (detectron2's post-processing).
    """

    score_threshold: float = 0.05
    nms_threshold: float = 0.5
    detections_per_image: int = 100
    fg_iou: float = 0.5
    bg_iou: float = 0.5
    batch_size_per_image: int = 512
    positive_fraction: float = 0.25
    box_pool: int = 7
    mask_pool: int = 14
    sampling_ratio: int = 2
    aligned: bool = False
    min_box_size: float = 1e-2
    drop_empty: bool = False


class RoIHeads(nn.Module):
    """Box head + predictor and mask head + predictor over FPN features."""

    def __init__(
        self,
        box_head: nn.Module,
        box_predictor: nn.Module,
        mask_head: nn.Module,
        mask_predictor: nn.Module,
        settings: RoISettings,
    ) -> None:
        super().__init__()
        self.box_head = box_head
        self.box_predictor = box_predictor
        self.mask_head = mask_head
        self.mask_predictor = mask_predictor
        self.settings = settings

    def _pool(
        self,
        feats: Sequence[Tensor],
        boxes: Sequence[Tensor] | Tensor,
        sizes: Sequence[tuple[int, int]],
        out: int,
    ) -> Tensor:
        s = self.settings
        return ops.multiscale_roi_align(
            feats, boxes, sizes, out, s.sampling_ratio, aligned=s.aligned
        )

    def _mask_logits(
        self,
        feats: Sequence[Tensor],
        boxes: Sequence[Tensor] | Tensor,
        sizes: Sequence[tuple[int, int]],
    ) -> Tensor:
        x = self._pool(feats, boxes, sizes, self.settings.mask_pool)
        return self.mask_predictor(self.mask_head(x))

    def forward(
        self,
        feats: Sequence[Tensor],
        proposals: Proposals,
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]] | None = None,
    ) -> tuple[BatchDetections | None, dict[str, Tensor]]:
        """Detections of the batch (eval) or losses (training, with ``targets``)."""
        if targets is not None:
            return None, self._losses(feats, proposals.per_image(), image_sizes, targets)
        return self._detect(feats, proposals, image_sizes), {}

    # ------------------------------------------------------------------ inference

    def _detect(
        self,
        feats: Sequence[Tensor],
        proposals: Proposals,
        image_sizes: Sequence[tuple[int, int]],
    ) -> BatchDetections:
        """Candidates of every image at once, one class-aware NMS for the batch, then
        the ``detections_per_image`` best of each image and their masks."""
        s = self.settings
        n, k = proposals.filled.shape
        x = self.box_head(self._pool(feats, proposals.boxes, image_sizes, s.box_pool))
        logits, deltas = self.box_predictor(x)
        c = logits.shape[1]
        props = proposals.boxes.reshape(-1, 4).to(deltas.dtype)
        boxes = ops.decode_boxes(deltas, props, BOX_WEIGHTS).view(n, k, c, 4)
        boxes = clip_per_image(boxes, image_sizes)[:, :, 1:]  # background out
        scores = F.softmax(logits, -1).view(n, k, c)[:, :, 1:]
        wide = (boxes[..., 2] - boxes[..., 0] >= s.min_box_size) & (
            boxes[..., 3] - boxes[..., 1] >= s.min_box_size
        )
        candidate = proposals.filled[:, :, None] & (scores > s.score_threshold) & wide
        picked = torch.nonzero(candidate.reshape(-1)).squeeze(1)  # host sync: how many
        if picked.shape[0] == 0:
            return BatchDetections.empty(n, s.detections_per_image, s.mask_pool * 2, props)
        cand_boxes = boxes.reshape(-1, 4)[picked]
        cand_scores = scores.reshape(-1)[picked]
        image = torch.div(picked, k * (c - 1), rounding_mode="floor")
        labels = picked % (c - 1) + 1
        keep = ops.batched_nms(cand_boxes, cand_scores, image * c + labels, s.nms_threshold)
        table, filled = first_per_group(keep, image[keep], n, s.detections_per_image)
        dets = BatchDetections(
            boxes=cand_boxes[table],
            scores=cand_scores[table],
            labels=labels[table],
            filled=filled,
            mask_probs=props.new_zeros((0, s.mask_pool * 2, s.mask_pool * 2)),
        )
        if s.drop_empty:
            b = dets.boxes
            dets.filled = filled & (b[..., 2] > b[..., 0]) & (b[..., 3] > b[..., 1])
        # At most every kept box, at most every slot: known here without a sync. On
        # the CPU, where a sync costs nothing, the exact count spares the mask head.
        rows = min(int(keep.shape[0]), n * s.detections_per_image)
        if not ops.on_gpu(dets.filled):
            rows = int(dets.filled.sum())
        dets.mask_probs = self._mask_probs(feats, dets, image_sizes, rows)
        return dets

    def _mask_probs(
        self,
        feats: Sequence[Tensor],
        dets: BatchDetections,
        image_sizes: Sequence[tuple[int, int]],
        rows: int,
    ) -> Tensor:
        """Mask probabilities ``(rows, M, M)`` of the filled slots in row-major order;
        ``rows`` (at least their number) fixes the shape, the rows past them are padding."""
        slots = torch.nonzero_static(dets.filled.reshape(-1), size=rows, fill_value=0).squeeze(1)
        per_image = dets.filled.shape[1]
        image = torch.div(slots, per_image, rounding_mode="floor").to(dets.boxes.dtype)
        rois = torch.cat((image[:, None], dets.boxes.reshape(-1, 4)[slots]), dim=1)
        logits = self._mask_logits(feats, rois, image_sizes)
        labels = dets.labels.reshape(-1)[slots]
        return logits[torch.arange(rows, device=logits.device), labels].sigmoid()

    # ------------------------------------------------------------------ training

    def _assign(
        self, proposals: Tensor, target: dict[str, Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Sampled proposals, their labels (-1: a filler row to leave out) and matched
        ground-truth indices; positives first. No host sync."""
        s = self.settings
        gt = target["boxes"].to(proposals.dtype)
        proposals = torch.cat([proposals, gt])
        if gt.numel() == 0:
            matched = torch.zeros(proposals.shape[0], dtype=torch.int64, device=gt.device)
            labels = torch.zeros_like(matched)
        else:
            m = match(ops.box_iou(gt, proposals), s.fg_iou, s.bg_iou, allow_low_quality=False)
            matched = m.clamp(min=0)
            labels = target["labels"][matched].to(torch.int64)
            labels = torch.where(m == BACKGROUND, 0, torch.where(m == IGNORE, -1, labels))
        index, kind = sample_labels(labels, s.batch_size_per_image, s.positive_fraction)
        labels = torch.where(kind == UNUSED, -1, labels[index])
        return proposals[index], labels, matched[index]

    def _losses(
        self,
        feats: Sequence[Tensor],
        proposals: Sequence[Tensor],
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]],
    ) -> dict[str, Tensor]:
        sampled = [self._assign(p, t) for p, t in zip(proposals, targets, strict=True)]
        props = [s[0] for s in sampled]
        labels = torch.cat([s[1] for s in sampled])
        reg_targets = []
        for (p, _, m), t in zip(sampled, targets, strict=True):
            gt = t["boxes"].to(p.dtype)
            ref = gt[m] if gt.numel() else torch.zeros_like(p)
            reg_targets.append(ops.encode_boxes(ref, p, BOX_WEIGHTS))
        x = self.box_head(self._pool(feats, props, image_sizes, self.settings.box_pool))
        logits, deltas = self.box_predictor(x)
        # Means over the sampled rows: filler rows (label -1) weigh nothing.
        loss_cls = F.cross_entropy(logits, labels, ignore_index=-1)
        count = (labels >= 0).sum().clamp(min=1)
        rows = torch.arange(labels.shape[0], device=labels.device)
        picked = deltas.reshape(deltas.shape[0], -1, 4)[rows, labels.clamp(min=0)]
        positive = (labels > 0)[:, None]
        # Only positive rows have a box to regress to (the others' may be infinite).
        target = torch.where(positive, torch.cat(reg_targets), 0.0)
        box = F.smooth_l1_loss(picked, target, beta=1 / 9, reduction="none")
        loss_box = (box * positive).sum() / count
        return {
            "loss_classifier": loss_cls,
            "loss_box_reg": loss_box,
            "loss_mask": self._mask_loss(feats, sampled, image_sizes, targets),
        }

    def _mask_loss(
        self,
        feats: Sequence[Tensor],
        sampled: Sequence[tuple[Tensor, Tensor, Tensor]],
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]],
    ) -> Tensor:
        """The mask loss of the positive rows (each image's first: one host sync for
        the batch, to know how many)."""
        boxes, labels, mask_targets = [], [], []
        size = self.settings.mask_pool * 2
        positives = torch.stack([(s[1] > 0).sum() for s in sampled]).tolist()
        for (p, lab, m), t, k in zip(sampled, targets, positives, strict=True):
            boxes.append(p[:k])
            labels.append(lab[:k])
            if k:
                gt_masks = t["masks"][:, None].to(p.dtype)
                rois = torch.cat([m[:k, None].to(p.dtype), p[:k]], dim=1)
                crops = ops.roi_align(gt_masks, rois, (size, size), 1.0, -1, self.settings.aligned)
                mask_targets.append(crops[:, 0])
        logits = self._mask_logits(feats, boxes, image_sizes)
        if not mask_targets:
            return logits.sum() * 0
        lab = torch.cat(labels)
        picked = logits[torch.arange(lab.shape[0], device=lab.device), lab]
        return F.binary_cross_entropy_with_logits(picked, torch.cat(mask_targets))
