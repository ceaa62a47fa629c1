"""Pure-PyTorch references of streamseg's post-processing ops.

These are the fallback path on every machine (CPU or GPU, any build) and the
yardstick the native kernels are tested against. They follow torchvision's
ops exactly (same formulas, same edge rules), so that torchvision-format
checkpoints give torchvision's results. Inputs are assumed validated by the
public wrappers in ``streamseg.ops``.

None has a Python loop whose trip count depends on the data (the number of
boxes, of kept boxes, of RoIs on a level): NMS, RoIAlign and the mask paste
live in :mod:`~streamseg.ops.reference_nms`,
:mod:`~streamseg.ops.reference_pool` and :mod:`~streamseg.ops.reference_paste`,
each a fixed sequence of batched tensor expressions, so that on a GPU they
cost a fixed number of kernel launches and host syncs.

Box format everywhere: ``xyxy`` in pixels, ``x2``/``y2`` exclusive edges
(areas are ``(x2 - x1) * (y2 - y1)``, no ``+1``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from streamseg.ops.reference_nms import batched_nms, nms
from streamseg.ops.reference_paste import (
    paste_boxes,
    paste_masks,
    paste_masks_binary,
    paste_masks_crops,
    paste_masks_packed,
    paste_masks_packed_loop,
    paste_regions,
)
from streamseg.ops.reference_pool import roi_align, roi_align_levels
from streamseg.ops.rle import mask_to_rle, masks_to_rle, rle_to_mask

__all__ = [
    "batched_nms",
    "box_area",
    "box_iou",
    "box_overlap_pairs",
    "clip_boxes",
    "decode_boxes",
    "encode_boxes",
    "map_levels",
    "mask_to_rle",
    "masks_to_rle",
    "multiscale_roi_align",
    "nms",
    "paste_boxes",
    "paste_masks",
    "paste_masks_binary",
    "paste_masks_crops",
    "paste_masks_packed",
    "paste_masks_packed_loop",
    "paste_regions",
    "remove_small_boxes",
    "rle_to_mask",
    "roi_align",
]

DEFAULT_BOX_CLAMP = math.log(1000.0 / 16)


# --------------------------------------------------------------------------- boxes


def box_area(boxes: Tensor) -> Tensor:
    """``(..., 4)`` xyxy -> ``(...)`` areas ``(x2 - x1) * (y2 - y1)`` (negative if inverted)."""
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    """Pairwise IoU of ``a (N, 4)`` and ``b (M, 4)`` xyxy -> ``(N, M)``.

    Intersections are clamped at zero; two zero-area boxes give ``nan``
    (0 / 0), as in torchvision.
    """
    area_a = box_area(a)
    area_b = box_area(b)
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def box_overlap_pairs(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Overlapping pairs of ``a (N, 4)`` and ``b (M, 4)`` xyxy with their IoU, every
    pair tested: ``rows, cols`` (by row, then column) and ``inter / max(union, 1e-12)``."""
    iw = torch.min(a[:, None, 2], b[None, :, 2]) - torch.max(a[:, None, 0], b[None, :, 0])
    ih = torch.min(a[:, None, 3], b[None, :, 3]) - torch.max(a[:, None, 1], b[None, :, 1])
    rows, cols = torch.nonzero((iw > 0) & (ih > 0), as_tuple=True)
    inter = iw[rows, cols] * ih[rows, cols]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[rows] + area_b[cols] - inter
    return rows, cols, inter / torch.clamp(union, min=1e-12)


def clip_boxes(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    """Clamp ``(..., 4)`` xyxy boxes to an image of ``size = (h, w)`` pixels."""
    h, w = size
    x = boxes[..., 0::2].clamp(min=0, max=w)
    y = boxes[..., 1::2].clamp(min=0, max=h)
    return torch.stack((x[..., 0], y[..., 0], x[..., 1], y[..., 1]), dim=-1)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    """Indices (int64, increasing) of boxes whose width and height are ``>= min_size``."""
    ws = boxes[:, 2] - boxes[:, 0]
    hs = boxes[:, 3] - boxes[:, 1]
    return torch.where((ws >= min_size) & (hs >= min_size))[0]


def encode_boxes(
    reference: Tensor, proposals: Tensor, weights: tuple[float, float, float, float]
) -> Tensor:
    """Regression targets ``(N, 4)`` (dx, dy, dw, dh) taking ``proposals`` to ``reference``.

    torchvision's ``BoxCoder.encode`` with ``weights = (wx, wy, ww, wh)``.
    """
    wx, wy, ww, wh = weights
    ex_w = proposals[:, 2] - proposals[:, 0]
    ex_h = proposals[:, 3] - proposals[:, 1]
    ex_x = proposals[:, 0] + 0.5 * ex_w
    ex_y = proposals[:, 1] + 0.5 * ex_h
    gt_w = reference[:, 2] - reference[:, 0]
    gt_h = reference[:, 3] - reference[:, 1]
    gt_x = reference[:, 0] + 0.5 * gt_w
    gt_y = reference[:, 1] + 0.5 * gt_h
    dx = wx * (gt_x - ex_x) / ex_w
    dy = wy * (gt_y - ex_y) / ex_h
    dw = ww * torch.log(gt_w / ex_w)
    dh = wh * torch.log(gt_h / ex_h)
    return torch.stack((dx, dy, dw, dh), dim=1)


def decode_boxes(
    deltas: Tensor,
    boxes: Tensor,
    weights: tuple[float, float, float, float],
    clamp: float = DEFAULT_BOX_CLAMP,
) -> Tensor:
    """Apply ``deltas (N, 4k)`` to ``boxes (N, 4)`` -> ``(N, k, 4)`` xyxy.

    torchvision's ``BoxCoder.decode``: ``dw``/``dh`` are clamped at ``clamp``
    from above before ``exp``.
    """
    wx, wy, ww, wh = weights
    boxes = boxes.to(deltas.dtype)
    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    d = deltas.reshape(deltas.shape[0], deltas.shape[1] // 4, 4)
    dx = d[..., 0] / wx
    dy = d[..., 1] / wy
    dw = (d[..., 2] / ww).clamp(max=clamp)
    dh = (d[..., 3] / wh).clamp(max=clamp)
    px = dx * widths[:, None] + ctr_x[:, None]
    py = dy * heights[:, None] + ctr_y[:, None]
    half_w = 0.5 * (torch.exp(dw) * widths[:, None])
    half_h = 0.5 * (torch.exp(dh) * heights[:, None])
    return torch.stack((px - half_w, py - half_h, px + half_w, py + half_h), dim=2)


# --------------------------------------------------------------------------- multi-scale

Align = Callable[[Tensor, Tensor, tuple[int, int], float, int, bool], Tensor]


def infer_scales(features: Sequence[Tensor], image_sizes: Sequence[tuple[int, int]]) -> list[float]:
    """Scale of each feature map: ``2 ** round(log2(feat_h / max_image_h))`` (torchvision)."""
    max_h = max(int(s[0]) for s in image_sizes)
    return list(_scales(tuple(int(f.shape[-2]) for f in features), max_h))


@functools.lru_cache(maxsize=64)
def _scales(heights: tuple[int, ...], max_h: int) -> tuple[float, ...]:
    # torchvision's float32 rounding, computed once per shape (host tensors).
    return tuple(
        2.0 ** float(torch.tensor(float(h) / float(max_h)).log2().round()) for h in heights
    )


def map_levels(
    boxes: Tensor,
    scales: Sequence[float],
    canonical_scale: float = 224.0,
    canonical_level: float = 4.0,
    eps: float = 1e-6,
) -> Tensor:
    """FPN level (index into ``scales``) of each ``(K, 4)`` box, int64.

    ``floor(canonical_level + log2(sqrt(area) / canonical_scale) + eps)``
    clamped to the levels present. A box with negative area (x2 < x1) maps to
    ``-1`` (no level: its pooled features stay zero, as in torchvision).
    """
    k_min = int(-math.log2(scales[0]))  # the scales are powers of two
    k_max = int(-math.log2(scales[-1]))
    s = torch.sqrt(box_area(boxes))
    lvl = torch.floor(canonical_level + torch.log2(s / canonical_scale) + eps)
    lvl = lvl.clamp(min=k_min, max=k_max)
    return torch.where(torch.isnan(lvl), -1, lvl.nan_to_num(0).long() - k_min)


def rois_from_boxes(boxes: Sequence[Tensor] | Tensor) -> Tensor:
    """Per-image ``(Ki, 4)`` boxes (or one ``(B, K, 4)`` tensor) -> ``(sum Ki, 5)`` rois,
    the image index first; a ``(K, 5)`` tensor is such rois already."""
    if isinstance(boxes, Tensor) and boxes.dim() == 2:
        return boxes
    if isinstance(boxes, Tensor):
        b, k = boxes.shape[0], boxes.shape[1]
        image = torch.arange(b, device=boxes.device, dtype=boxes.dtype).repeat_interleave(k)
        return torch.cat((image[:, None], boxes.reshape(-1, 4)), dim=1)
    parts = [torch.cat((torch.full_like(b[:, :1], i), b), dim=1) for i, b in enumerate(boxes)]
    return torch.cat(parts, dim=0)


def multiscale_roi_align(
    features: Sequence[Tensor],
    boxes: Sequence[Tensor] | Tensor,
    image_sizes: Sequence[tuple[int, int]],
    output_size: int | tuple[int, int],
    sampling_ratio: int,
    canonical_scale: float = 224.0,
    canonical_level: float = 4.0,
    *,
    aligned: bool = False,
    align: Align | None = None,
    every_level: bool = False,
) -> Tensor:
    """torchvision's ``MultiScaleRoIAlign`` over FPN ``features`` (finest first).

    ``features[l] (B, C, Hl, Wl)``, ``boxes[i] (Ki, 4)`` xyxy image pixels
    (or ``(B, K, 4)``, or ``(K, 5)`` rois) -> ``(sum Ki, C, oh, ow)``, RoIs in
    image order.

    ``align`` pools one level (a native kernel). Without it, every RoI is
    pooled from its level in one pass (:func:`roi_align_levels`). With it,
    each level's RoIs are pooled by one call per level; ``every_level``
    (for GPUs) pools all RoIs on every level and keeps each RoI's own, so
    that no step waits for the number of RoIs of a level (a host sync).
    """
    size = (
        (output_size, output_size)
        if isinstance(output_size, int)
        else (int(output_size[0]), int(output_size[1]))
    )
    rois = rois_from_boxes(boxes)
    scales = infer_scales(features, image_sizes)
    if len(features) == 1 and align is not None:
        return align(features[0], rois, size, scales[0], sampling_ratio, aligned)
    levels = map_levels(rois[:, 1:], scales, canonical_scale, canonical_level)
    if align is None:
        return roi_align_levels(features, rois, levels, scales, size, sampling_ratio, aligned)
    first = features[0]
    out = first.new_zeros((rois.shape[0], first.shape[1], *size))
    for lvl, (feat, scale) in enumerate(zip(features, scales, strict=True)):
        if every_level:
            pooled = align(feat, rois, size, scale, sampling_ratio, aligned)
            out = torch.where((levels == lvl)[:, None, None, None], pooled, out)
            continue
        idx = torch.where(levels == lvl)[0]
        if idx.numel():
            out[idx] = align(feat, rois[idx], size, scale, sampling_ratio, aligned)
    return out
