"""RoI heads: box classification/regression and masks, inference and losses.

Inference (per image): softmax class scores, per-class decoded boxes clipped
to the image, background dropped, scores ``> score_threshold``, tiny boxes
dropped, class-aware NMS, the ``detections_per_image`` best; then the mask
head runs on the kept boxes and each box keeps the mask of its class.
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
from streamseg.models.maskrcnn.nms import batched_nms_top_k
from streamseg.models.maskrcnn.sampling import BACKGROUND, IGNORE, match, sample_labels

__all__ = ["RoIHeads", "RoISettings"]

BOX_WEIGHTS = (10.0, 10.0, 5.0, 5.0)


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
        boxes: Sequence[Tensor],
        sizes: Sequence[tuple[int, int]],
        out: int,
    ) -> Tensor:
        s = self.settings
        return ops.multiscale_roi_align(
            feats, boxes, sizes, out, s.sampling_ratio, aligned=s.aligned
        )

    def _mask_logits(
        self, feats: Sequence[Tensor], boxes: Sequence[Tensor], sizes: Sequence[tuple[int, int]]
    ) -> Tensor:
        x = self._pool(feats, boxes, sizes, self.settings.mask_pool)
        return self.mask_predictor(self.mask_head(x))

    def forward(
        self,
        feats: Sequence[Tensor],
        proposals: Sequence[Tensor],
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]] | None = None,
    ) -> tuple[list[dict[str, Tensor]], dict[str, Tensor]]:
        """Detections per image (eval) or losses (training, with ``targets``).

        Detections: ``boxes (K, 4)`` xyxy resized-image pixels, ``scores``,
        ``labels`` int64, ``mask_probs (K, M, M)`` sigmoid of the box's class.
        """
        if targets is not None:
            return [], self._losses(feats, proposals, image_sizes, targets)
        return self._detect(feats, proposals, image_sizes), {}

    # ------------------------------------------------------------------ inference

    def _detect(
        self,
        feats: Sequence[Tensor],
        proposals: Sequence[Tensor],
        image_sizes: Sequence[tuple[int, int]],
    ) -> list[dict[str, Tensor]]:
        x = self.box_head(self._pool(feats, proposals, image_sizes, self.settings.box_pool))
        logits, deltas = self.box_predictor(x)
        props = torch.cat(list(proposals))
        boxes = ops.decode_boxes(deltas, props.to(deltas.dtype), BOX_WEIGHTS)
        scores = F.softmax(logits, -1)
        counts = [int(p.shape[0]) for p in proposals]
        results = [
            self._select(b, s, size)
            for b, s, size in zip(
                boxes.split(counts), scores.split(counts), image_sizes, strict=True
            )
        ]
        kept = [r["boxes"] for r in results]
        if sum(int(k.shape[0]) for k in kept) == 0:
            m = self.settings.mask_pool * 2
            for r in results:
                r["mask_probs"] = r["boxes"].new_zeros((0, m, m))
            return results
        mask_logits = self._mask_logits(feats, kept, image_sizes)
        labels = torch.cat([r["labels"] for r in results])
        probs = mask_logits[torch.arange(labels.shape[0], device=labels.device), labels].sigmoid()
        for r, p in zip(results, probs.split([int(k.shape[0]) for k in kept]), strict=True):
            r["mask_probs"] = p
        return results

    def _select(self, boxes: Tensor, scores: Tensor, size: tuple[int, int]) -> dict[str, Tensor]:
        s = self.settings
        num_classes = scores.shape[1]
        boxes = ops.clip_boxes(boxes, size)[:, 1:].reshape(-1, 4)
        labels = torch.arange(num_classes, device=scores.device).expand_as(scores)[:, 1:]
        labels = labels.reshape(-1)
        scores = scores[:, 1:].reshape(-1)
        keep = torch.where(scores > s.score_threshold)[0]
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        keep = ops.remove_small_boxes(boxes, s.min_box_size)
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        keep = batched_nms_top_k(boxes, scores, labels, s.nms_threshold, s.detections_per_image)
        if s.drop_empty:
            kept = boxes[keep]
            keep = keep[(kept[:, 2] > kept[:, 0]) & (kept[:, 3] > kept[:, 1])]
        return {"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]}

    # ------------------------------------------------------------------ training

    def _assign(
        self, proposals: Tensor, target: dict[str, Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Sampled proposals, their labels and matched ground-truth indices."""
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
            labels[m == BACKGROUND] = 0
            labels[m == IGNORE] = -1
        pos, neg = sample_labels(labels, s.batch_size_per_image, s.positive_fraction)
        idx = torch.cat([pos, neg])
        return proposals[idx], labels[idx], matched[idx]

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
        loss_cls = F.cross_entropy(logits, labels)
        pos = torch.where(labels > 0)[0]
        deltas = deltas.reshape(deltas.shape[0], -1, 4)
        loss_box = F.smooth_l1_loss(
            deltas[pos, labels[pos]], torch.cat(reg_targets)[pos], beta=1 / 9, reduction="sum"
        ) / max(labels.numel(), 1)
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
        boxes, labels, mask_targets = [], [], []
        size = self.settings.mask_pool * 2
        for (p, lab, m), t in zip(sampled, targets, strict=True):
            pos = torch.where(lab > 0)[0]
            boxes.append(p[pos])
            labels.append(lab[pos])
            if pos.numel():
                gt_masks = t["masks"][:, None].to(p.dtype)
                rois = torch.cat([m[pos, None].to(p.dtype), p[pos]], dim=1)
                crops = ops.roi_align(gt_masks, rois, (size, size), 1.0, -1, self.settings.aligned)
                mask_targets.append(crops[:, 0])
        logits = self._mask_logits(feats, boxes, image_sizes)
        if not mask_targets:
            return logits.sum() * 0
        lab = torch.cat(labels)
        picked = logits[torch.arange(lab.shape[0], device=lab.device), lab]
        return F.binary_cross_entropy_with_logits(picked, torch.cat(mask_targets))
