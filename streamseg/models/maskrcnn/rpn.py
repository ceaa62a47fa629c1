"""Region proposal network: anchors, the RPN head, proposals and RPN losses.

Anchors, proposal filtering and losses follow Faster R-CNN as torchvision
implements it, so torchvision weights give torchvision's proposals: per FPN
level the ``pre_nms_top_n`` best anchors, decoded, clipped, tiny boxes
dropped, NMS per level, then the ``post_nms_top_n`` best per image. The
detectron2 style changes the details (exact anchors on fixed strides, only
empty proposals dropped, ranking by logit; see ``styles.py``) through
:class:`AnchorGenerator` and :class:`RPNSettings`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from streamseg import ops
from streamseg.models.maskrcnn.fpn import conv_norm_act
from streamseg.models.maskrcnn.nms import clip_per_image, first_per_group
from streamseg.models.maskrcnn.sampling import (
    IGNORE,
    POSITIVE,
    UNUSED,
    match,
    sample_labels,
)
from streamseg.ops.transfer import to_device

__all__ = ["RPN", "AnchorGenerator", "Proposals", "RPNHead", "RPNSettings"]


class Proposals(NamedTuple):
    """The proposals of a batch, the same number of slots for every image.

    ``boxes`` ``(B, K, 4)`` xyxy resized-image pixels, best first;
    ``filled`` ``(B, K)`` bool: which slots hold a proposal (an image's
    filled slots come first; the others hold some box, to be ignored).
    """

    boxes: Tensor
    filled: Tensor

    def per_image(self) -> list[Tensor]:
        """Each image's proposals ``(Ki, 4)`` (one host sync for the batch: for training)."""
        counts = self.filled.sum(dim=1).tolist()
        return [b[:k] for b, k in zip(self.boxes, counts, strict=True)]


RPN_BOX_WEIGHTS = (1.0, 1.0, 1.0, 1.0)


class AnchorGenerator(nn.Module):
    """Anchors of every FPN level: ``sizes[l]`` x ``aspect_ratios`` at each location.

    Anchors are ``(sum_l Hl*Wl*A, 4)`` xyxy image pixels, location-major
    (row, column) then anchor. An anchor of size ``s`` and ratio ``r``
    (height / width) has area ``s**2``.

    Args:
        sizes: one anchor size per level, finest first.
        aspect_ratios: height / width of the anchors at each location.
        rounded: round the base anchors to integer pixels (torchvision);
            detectron2 keeps them exact.
        strides: pixels between two locations of each level; ``None``: the
            padded image size divided (integer) by the feature size
            (torchvision), which differs from ``2 ** level`` on a level
            whose input had an odd size.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        aspect_ratios: Sequence[float] = (0.5, 1.0, 2.0),
        *,
        rounded: bool = True,
        strides: Sequence[int] | None = None,
    ):
        super().__init__()
        self.sizes = tuple(int(s) for s in sizes)
        self.aspect_ratios = tuple(float(a) for a in aspect_ratios)
        self.rounded = rounded
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        if self.strides is not None and len(self.strides) != len(self.sizes):
            raise ValueError(f"got {len(self.strides)} strides for {len(self.sizes)} anchor sizes")
        self._cache: dict[tuple[object, ...], Tensor] = {}

    @property
    def num_anchors(self) -> int:
        """Anchors per location (the same on every level)."""
        return len(self.aspect_ratios)

    def base_anchors(self, size: int) -> Tensor:
        """``(A, 4)`` float32 anchors centred on 0 (rounded to integers when ``rounded``)."""
        if not self.rounded:
            # In float64 first, so that only the final float32 cast rounds.
            rows = []
            for ratio in self.aspect_ratios:
                w = math.sqrt(size * size / ratio)
                h = ratio * w
                rows.append([-w / 2, -h / 2, w / 2, h / 2])
            return torch.tensor(rows, dtype=torch.float64).float()
        ratios = torch.tensor(self.aspect_ratios, dtype=torch.float32)
        h_ratios = torch.sqrt(ratios)
        ws = (1 / h_ratios) * size
        hs = h_ratios * size
        return (torch.stack([-ws, -hs, ws, hs], dim=1) / 2).round()

    def _stride(
        self, level: int, image_size: tuple[int, int], grid: tuple[int, int]
    ) -> tuple[int, int]:
        if self.strides is not None:
            return self.strides[level], self.strides[level]
        return image_size[0] // grid[0], image_size[1] // grid[1]

    def forward(
        self,
        image_size: tuple[int, int],
        grid_sizes: Sequence[tuple[int, int]],
        device: torch.device,
    ) -> Tensor:
        key = (image_size, tuple(grid_sizes), str(device))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        out = []
        for level, (size, (gh, gw)) in enumerate(zip(self.sizes, grid_sizes, strict=True)):
            sh, sw = self._stride(level, image_size, (gh, gw))
            xs = torch.arange(gw, dtype=torch.int32, device=device) * sw
            ys = torch.arange(gh, dtype=torch.int32, device=device) * sh
            yy, xx = torch.meshgrid(ys, xs, indexing="ij")
            shifts = torch.stack((xx, yy, xx, yy), dim=-1).reshape(-1, 1, 4)
            base = to_device(self.base_anchors(size), device)
            out.append((shifts + base[None]).reshape(-1, 4))
        anchors = torch.cat(out)
        if len(self._cache) > 16:
            self._cache.clear()
        self._cache[key] = anchors
        return anchors


class RPNHead(nn.Module):
    """``conv_depth`` 3x3 convs + ReLU, then objectness logits and box deltas per anchor."""

    def __init__(self, channels: int, num_anchors: int, conv_depth: int = 1) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            *(conv_norm_act(channels, channels, 3, norm=False) for _ in range(conv_depth))
        )
        self.cls_logits = nn.Conv2d(channels, num_anchors, 1)
        self.bbox_pred = nn.Conv2d(channels, num_anchors * 4, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def forward(self, feats: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        logits, deltas = [], []
        for f in feats:
            t = self.conv(f)
            logits.append(self.cls_logits(t))
            deltas.append(self.bbox_pred(t))
        return logits, deltas


@dataclasses.dataclass(frozen=True)
class RPNSettings:
    """Proposal counts and thresholds (test-time and train-time top-n differ)."""

    pre_nms_top_n_test: int = 1000
    post_nms_top_n_test: int = 1000
    pre_nms_top_n_train: int = 2000
    post_nms_top_n_train: int = 2000
    nms_threshold: float = 0.7
    fg_iou: float = 0.7
    bg_iou: float = 0.3
    batch_size_per_image: int = 256
    positive_fraction: float = 0.5
    min_size: float = 1e-3  # proposals narrower/shorter are dropped; 0: only empty ones
    rank_by_logits: bool = False  # NMS order by logit, not by float32 sigmoid (detectron2)


def _flatten(levels: Sequence[Tensor], k: int) -> Tensor:
    """``(N, A*k, H, W)`` per level -> ``(N, sum H*W*A, k)`` location-major."""
    out = []
    for t in levels:
        n, ak, h, w = t.shape
        out.append(t.view(n, ak // k, k, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, k))
    return torch.cat(out, dim=1)


class RPN(nn.Module):
    """Anchors + head -> proposals per image (and losses in training)."""

    def __init__(self, anchors: AnchorGenerator, head: RPNHead, settings: RPNSettings) -> None:
        super().__init__()
        self.anchor_generator = anchors
        self.head = head
        self.settings = settings

    def forward(
        self,
        images: Tensor,
        feats: Sequence[Tensor],
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]] | None = None,
    ) -> tuple[Proposals, dict[str, Tensor]]:
        """:class:`Proposals` (resized-image pixels) and the losses (training)."""
        logits, deltas = self.head(feats)
        grid = [(int(f.shape[-2]), int(f.shape[-1])) for f in feats]
        anchors = self.anchor_generator(
            (int(images.shape[-2]), int(images.shape[-1])), grid, images.device
        )
        per_level = [h * w * self.anchor_generator.num_anchors for h, w in grid]
        obj = _flatten(logits, 1)[..., 0]  # (N, P)
        reg = _flatten(deltas, 4)  # (N, P, 4)
        n = obj.shape[0]
        boxes = ops.decode_boxes(
            reg.detach().reshape(-1, 4), anchors.repeat(n, 1).to(reg.dtype), RPN_BOX_WEIGHTS
        )
        proposals = self._filter(boxes.view(n, -1, 4), obj.detach(), per_level, image_sizes)
        losses: dict[str, Tensor] = {}
        if targets is not None:
            losses = self._losses(anchors, obj, reg, targets)
        return proposals, losses

    def _top_n(self) -> tuple[int, int]:
        s = self.settings
        if self.training:
            return s.pre_nms_top_n_train, s.post_nms_top_n_train
        return s.pre_nms_top_n_test, s.post_nms_top_n_test

    def _filter(
        self,
        boxes: Tensor,
        obj: Tensor,
        per_level: list[int],
        image_sizes: Sequence[tuple[int, int]],
    ) -> Proposals:
        """Best anchors per level, clipped, small ones out, NMS per image and level (one
        call for the batch), then the ``post_nms_top_n`` best of each image."""
        pre, post = self._top_n()
        n = obj.shape[0]
        idx, lvl = [], []
        offset = 0
        for level, count in enumerate(per_level):  # one step per FPN level
            k = min(pre, count)
            top = obj[:, offset : offset + count].topk(k, dim=1).indices
            idx.append(top + offset)
            lvl.append(torch.full((k,), level, dtype=torch.int64, device=obj.device))
            offset += count
        top_idx = torch.cat(idx, dim=1)  # (N, K)
        width = top_idx.shape[1]
        scores = obj.gather(1, top_idx)
        if not self.settings.rank_by_logits:
            scores = torch.sigmoid(scores)
        boxes = clip_per_image(boxes.gather(1, top_idx[..., None].expand(-1, -1, 4)), image_sizes)
        large = _large_enough(boxes, self.settings.min_size)
        # Small boxes rank last: they can suppress nothing that is kept.
        ranked = torch.where(large, scores, float("-inf")).reshape(-1)
        groups = torch.arange(n, device=obj.device)[:, None] * len(per_level) + torch.cat(lvl)
        flat = boxes.reshape(-1, 4)
        keep = ops.batched_nms(flat, ranked, groups.reshape(-1), self.settings.nms_threshold)
        image = torch.div(keep, width, rounding_mode="floor")
        image = torch.where(large.reshape(-1)[keep], image, n)
        table, filled = first_per_group(keep, image, n, min(post, width))
        return Proposals(flat[table], filled)

    def _losses(
        self, anchors: Tensor, obj: Tensor, reg: Tensor, targets: Sequence[dict[str, Tensor]]
    ) -> dict[str, Tensor]:
        """Objectness (mean over the sampled anchors) and box regression (summed over
        the positive ones, divided by the number sampled); no host sync."""
        s = self.settings
        rows, kinds, labels, regression = [], [], [], []
        total = anchors.shape[0]
        for i, t in enumerate(targets):
            gt = t["boxes"].to(anchors.dtype)
            if gt.numel() == 0:
                lab = torch.zeros(total, device=anchors.device)
                matched = torch.zeros_like(anchors)
            else:
                m = match(ops.box_iou(gt, anchors), s.fg_iou, s.bg_iou, allow_low_quality=True)
                matched = gt[m.clamp(min=0)]
                lab = torch.where(m == IGNORE, -1.0, (m >= 0).to(anchors.dtype))
            index, kind = sample_labels(lab, s.batch_size_per_image, s.positive_fraction)
            rows.append(index + i * total)
            kinds.append(kind)
            labels.append(lab[index])
            regression.append(ops.encode_boxes(matched[index], anchors[index], RPN_BOX_WEIGHTS))
        row, kind = torch.cat(rows), torch.cat(kinds)
        sampled = (kind != UNUSED).to(obj.dtype)
        count = sampled.sum().clamp(min=1)
        positive = (kind == POSITIVE)[:, None]
        # Only positive rows have a box to regress to (the others' may be infinite).
        target = torch.where(positive, torch.cat(regression), 0.0)
        box = F.smooth_l1_loss(reg.reshape(-1, 4)[row], target, beta=1 / 9, reduction="none")
        box_loss = (box * positive).sum() / count
        # Unused rows (label -1 when ignored) weigh nothing.
        bce = F.binary_cross_entropy_with_logits(
            obj.reshape(-1)[row], torch.cat(labels).clamp(min=0), reduction="none"
        )
        obj_loss = (bce * sampled).sum() / count
        return {"loss_objectness": obj_loss, "loss_rpn_box_reg": box_loss}


def _large_enough(boxes: Tensor, min_size: float) -> Tensor:
    """Whether ``(..., 4)`` boxes are at least ``min_size`` wide and high (``0``: non-empty)."""
    ws = boxes[..., 2] - boxes[..., 0]
    hs = boxes[..., 3] - boxes[..., 1]
    if min_size > 0:
        return (ws >= min_size) & (hs >= min_size)
    return (ws > 0) & (hs > 0)
