"""Pure-PyTorch references of streamseg's post-processing ops.

These are the fallback path on every machine (CPU or GPU, any build) and the
yardstick the native kernels are tested against. They follow torchvision's
ops exactly (same formulas, same edge rules), so that torchvision-format
checkpoints give torchvision's results. Inputs are assumed validated by the
public wrappers in ``streamseg.ops``.

Box format everywhere: ``xyxy`` in pixels, ``x2``/``y2`` exclusive edges
(areas are ``(x2 - x1) * (y2 - y1)``, no ``+1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

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
    "paste_masks",
    "paste_masks_binary",
    "paste_masks_crops",
    "remove_small_boxes",
    "rle_to_mask",
    "roi_align",
]

DEFAULT_BOX_CLAMP = math.log(1000.0 / 16)
# Largest temporary a chunk of ``roi_align`` gathers, in elements (64 MiB fp32).
_GATHER_BUDGET = 1 << 24


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


# --------------------------------------------------------------------------- nms


def _nms_sorted(boxes: Tensor, scores: Tensor, idxs: Tensor | None, iou_threshold: float) -> Tensor:
    """Greedy NMS; ``idxs`` (optional) restricts suppression to equal values."""
    order = torch.sort(scores, descending=True, stable=True)[1]
    keep: list[Tensor] = []
    # One iteration per kept box (inherently sequential); each is vectorised.
    while order.numel() > 0:
        i = order[:1]
        keep.append(i)
        rest = order[1:]
        suppressed = box_iou(boxes[i], boxes[rest])[0] > iou_threshold
        if idxs is not None:
            suppressed &= idxs[rest] == idxs[i]
        order = rest[~suppressed]
    if not keep:
        return torch.empty(0, dtype=torch.int64, device=boxes.device)
    return torch.cat(keep)


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Indices (int64) of boxes kept by greedy NMS, by decreasing score.

    A box is suppressed by a kept, higher-scored box when their IoU is
    ``> iou_threshold``; equal scores keep their input order.
    """
    return _nms_sorted(boxes, scores, None, iou_threshold)


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """NMS run independently per value of ``idxs``; kept indices by decreasing score."""
    return _nms_sorted(boxes, scores, idxs, iou_threshold)


# --------------------------------------------------------------------------- roi_align


def _axis_samples(
    start: Tensor, bin_size: Tensor, grid: Tensor, pooled: int, gmax: int, size: int
) -> tuple[Tensor, Tensor]:
    """Bilinear taps along one axis for a chunk of RoIs.

    Returns ``index (K, pooled, 2 * gmax)`` int64 and ``weight`` of the same
    shape: for each output bin, the low and high neighbour of each sample
    point, with weight zero for samples past the RoI's grid or outside
    ``[-1, size]`` (torchvision's rules).
    """
    dtype = start.dtype
    p = torch.arange(pooled, device=start.device, dtype=dtype)
    i = torch.arange(gmax, device=start.device, dtype=dtype)
    g = grid.clamp(min=1).to(dtype)[:, None, None]
    b = bin_size[:, None, None]
    coord = (start[:, None, None] + p[None, :, None] * b) + (i[None, None, :] + 0.5) * b / g
    valid = (coord >= -1.0) & (coord <= size) & (i[None, None, :] < grid[:, None, None])
    coord = coord.clamp(min=0)
    low = coord.floor().long()
    edge = low >= size - 1
    low = torch.where(edge, size - 1, low)
    high = torch.where(edge, size - 1, low + 1)
    coord = torch.where(edge, low.to(dtype), coord)
    frac = coord - low.to(dtype)
    w_low = torch.where(valid, 1.0 - frac, 0.0)
    w_high = torch.where(valid, frac, 0.0)
    index = torch.stack((low, high), dim=-1).flatten(-2)
    weight = torch.stack((w_low, w_high), dim=-1).flatten(-2)
    return index, weight


def _roi_geometry(
    rois: Tensor, pooled: tuple[int, int], scale: float, sampling_ratio: int, aligned: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per-RoI (start_y, start_x, bin_h, bin_w, grid_h, grid_w)."""
    offset = 0.5 if aligned else 0.0
    sx = rois[:, 1] * scale - offset
    sy = rois[:, 2] * scale - offset
    rw = rois[:, 3] * scale - offset - sx
    rh = rois[:, 4] * scale - offset - sy
    if not aligned:
        rw = rw.clamp(min=1.0)
        rh = rh.clamp(min=1.0)
    bh, bw = rh / pooled[0], rw / pooled[1]
    if sampling_ratio > 0:
        gh = torch.full_like(sx, sampling_ratio, dtype=torch.int64)
        gw = gh
    else:
        gh = torch.ceil(rh / pooled[0]).long()
        gw = torch.ceil(rw / pooled[1]).long()
    return sy, sx, bh, bw, gh, gw


def roi_align(
    input: Tensor,
    rois: Tensor,
    output_size: tuple[int, int],
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
    aligned: bool = False,
) -> Tensor:
    """RoIAlign (torchvision semantics), differentiable w.r.t. ``input``.

    ``input (B, C, H, W)``, ``rois (K, 5)`` rows ``(batch_index, x1, y1, x2, y2)``
    in image pixels, scaled by ``spatial_scale`` -> ``(K, C, oh, ow)``. Each
    output bin averages ``grid_h x grid_w`` bilinear samples; a grid side is
    ``sampling_ratio`` or, when that is ``<= 0``, ``ceil(roi_side / out_side)``.
    """
    oh, ow = output_size
    n_batch, channels, height, width = input.shape
    k = rois.shape[0]
    if k == 0 or height == 0 or width == 0:
        return input.new_zeros((k, channels, oh, ow))
    cdtype = input.dtype if input.dtype in (torch.float32, torch.float64) else torch.float32
    rois = rois.detach().to(cdtype)
    sy, sx, bh, bw, gh, gw = _roi_geometry(rois, (oh, ow), spatial_scale, sampling_ratio, aligned)
    gmax_h = max(int(gh.max()), 1)
    gmax_w = max(int(gw.max()), 1)
    count = (gh * gw).clamp(min=1).to(cdtype)
    batch = rois[:, 0].long()
    flat = input.transpose(0, 1).reshape(channels, n_batch * height * width)
    per_roi = channels * oh * ow * 4 * gmax_h * gmax_w
    step = max(1, _GATHER_BUDGET // per_roi)
    outs = []
    for lo in range(0, k, step):
        sl = slice(lo, lo + step)
        yi, wy = _axis_samples(sy[sl], bh[sl], gh[sl], oh, gmax_h, height)
        xi, wx = _axis_samples(sx[sl], bw[sl], gw[sl], ow, gmax_w, width)
        base = batch[sl] * (height * width)
        index = (
            base[:, None, None, None, None]
            + yi[:, :, :, None, None] * width
            + xi[:, None, None, :, :]
        )
        taps = flat[:, index].to(cdtype)  # (C, k, oh, 2gh, ow, 2gw)
        val = torch.einsum("kpa,ckpaqb,kqb->kcpq", wy, taps, wx)
        outs.append(val / count[sl, None, None, None])
    return torch.cat(outs).to(input.dtype)


# --------------------------------------------------------------------------- multi-scale


def infer_scales(features: Sequence[Tensor], image_sizes: Sequence[tuple[int, int]]) -> list[float]:
    """Scale of each feature map: ``2 ** round(log2(feat_h / max_image_h))`` (torchvision)."""
    max_h = max(int(s[0]) for s in image_sizes)
    scales = []
    for feat in features:
        approx = float(feat.shape[-2]) / float(max_h)
        scales.append(2.0 ** float(torch.tensor(approx).log2().round()))
    return scales


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
    k_min = int(-torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item())
    k_max = int(-torch.log2(torch.tensor(scales[-1], dtype=torch.float32)).item())
    s = torch.sqrt(box_area(boxes))
    lvl = torch.floor(canonical_level + torch.log2(s / canonical_scale) + eps)
    lvl = lvl.clamp(min=k_min, max=k_max)
    return torch.where(torch.isnan(lvl), -1, lvl.nan_to_num(0).long() - k_min)


def rois_from_boxes(boxes: Sequence[Tensor]) -> Tensor:
    """Per-image ``(Ki, 4)`` boxes -> ``(sum Ki, 5)`` rois with the image index first."""
    parts = [torch.cat((torch.full_like(b[:, :1], i), b), dim=1) for i, b in enumerate(boxes)]
    return torch.cat(parts, dim=0)


def multiscale_roi_align(
    features: Sequence[Tensor],
    boxes: Sequence[Tensor],
    image_sizes: Sequence[tuple[int, int]],
    output_size: int | tuple[int, int],
    sampling_ratio: int,
    canonical_scale: float = 224.0,
    canonical_level: float = 4.0,
    *,
    aligned: bool = False,
    align: Callable[[Tensor, Tensor, tuple[int, int], float, int, bool], Tensor] | None = None,
) -> Tensor:
    """torchvision's ``MultiScaleRoIAlign`` over FPN ``features`` (finest first).

    ``features[l] (B, C, Hl, Wl)``, ``boxes[i] (Ki, 4)`` xyxy image pixels ->
    ``(sum Ki, C, oh, ow)``, RoIs in image order. ``align`` pools one level
    (default: this module's :func:`roi_align`; the native op when loaded).
    """
    align = roi_align if align is None else align
    size = (
        (output_size, output_size)
        if isinstance(output_size, int)
        else (int(output_size[0]), int(output_size[1]))
    )
    rois = rois_from_boxes(boxes)
    scales = infer_scales(features, image_sizes)
    if len(features) == 1:
        return align(features[0], rois, size, scales[0], sampling_ratio, aligned)
    levels = map_levels(rois[:, 1:], scales, canonical_scale, canonical_level)
    first = features[0]
    out = first.new_zeros((rois.shape[0], first.shape[1], *size))
    for lvl, (feat, scale) in enumerate(zip(features, scales, strict=True)):
        idx = torch.where(levels == lvl)[0]
        if idx.numel():
            out[idx] = align(feat, rois[idx], size, scale, sampling_ratio, aligned)
    return out


# --------------------------------------------------------------------------- paste


def paste_boxes(boxes: Tensor, mask_size: int, padding: int) -> Tensor:
    """Integer frame boxes ``(N, 4)`` int64 the padded masks are resized onto.

    torchvision's ``expand_boxes`` by ``(M + 2 * padding) / M`` about the box
    centre, then truncation toward zero; the pasted mask covers
    ``x1..x2`` and ``y1..y2`` inclusive.
    """
    scale = float(mask_size + 2 * padding) / mask_size
    w_half = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale
    h_half = (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    x_c = (boxes[:, 2] + boxes[:, 0]) * 0.5
    y_c = (boxes[:, 3] + boxes[:, 1]) * 0.5
    out = torch.stack((x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half), dim=1)
    return out.to(torch.int64)


def paste_masks(
    masks: Tensor, boxes: Tensor, image_size: tuple[int, int], padding: int = 1
) -> Tensor:
    """torchvision's ``paste_masks_in_image``: ``(N, M, M)`` probabilities -> ``(N, h, w)``.

    Each mask is padded by ``padding`` zeros, resized bilinearly
    (``align_corners=False``) to its expanded integer box and pasted where
    that box overlaps the frame; the rest is 0. The caller thresholds.
    """
    h, w = image_size
    n = masks.shape[0]
    out = masks.new_zeros((n, h, w))
    if n == 0:
        return out
    padded = F.pad(masks, (padding,) * 4)
    int_boxes = paste_boxes(boxes, masks.shape[-1], padding).tolist()
    for i, (x0, y0, x1, y1) in enumerate(int_boxes):
        fx0, fy0 = max(x0, 0), max(y0, 0)
        fx1, fy1 = min(x1 + 1, w), min(y1 + 1, h)
        if fx1 <= fx0 or fy1 <= fy0:
            continue
        size = (max(y1 - y0 + 1, 1), max(x1 - x0 + 1, 1))
        res = F.interpolate(padded[i][None, None], size=size, mode="bilinear", align_corners=False)
        out[i, fy0:fy1, fx0:fx1] = res[0, 0, fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0]
    return out


def paste_masks_binary(
    masks: Tensor,
    boxes: Tensor,
    image_size: tuple[int, int],
    threshold: float = 0.5,
    padding: int = 1,
) -> Tensor:
    """:func:`paste_masks` thresholded: ``(N, h, w)`` bool, ``probability > threshold``."""
    return paste_masks(masks, boxes, image_size, padding) > threshold


def paste_regions(int_boxes: Tensor, image_size: tuple[int, int]) -> Tensor:
    """Where pasted masks can be non-zero: ``(N, 4)`` int64 ``x0, y0, x1, y1`` (exclusive).

    The inclusive ``int_boxes`` of :func:`paste_boxes` clipped to the frame;
    a box outside the frame becomes an empty region on the nearest edge.
    """
    h, w = image_size
    x0 = int_boxes[:, 0].clamp(0, w)
    y0 = int_boxes[:, 1].clamp(0, h)
    x1 = torch.maximum((int_boxes[:, 2] + 1).clamp(max=w), x0)
    y1 = torch.maximum((int_boxes[:, 3] + 1).clamp(max=h), y0)
    return torch.stack((x0, y0, x1, y1), dim=1)


def paste_masks_crops(
    masks: Tensor,
    boxes: Tensor,
    image_size: tuple[int, int],
    threshold: float = 0.5,
    padding: int = 1,
) -> tuple[list[Tensor], Tensor]:
    """:func:`paste_masks_binary` written only where each mask can be set.

    Returns ``(crops, regions)``: ``regions`` ``(N, 4)`` int64 ``x0, y0, x1,
    y1`` (exclusive, inside the frame) from :func:`paste_regions`, and
    ``crops[i]`` bool ``(y1 - y0, x1 - x0)``, equal to
    ``paste_masks_binary(...)[i, y0:y1, x0:x1]``; the frame-size mask is 0
    (below any ``threshold >= 0``) outside the region. The cost follows the
    boxes' area, not the frame's.
    """
    n = masks.shape[0]
    int_boxes = paste_boxes(boxes, masks.shape[-1], padding)
    regions = paste_regions(int_boxes, image_size)
    if n == 0:
        return [], regions
    padded = F.pad(masks, (padding,) * 4)
    crops = []
    for i, ((x0, y0, x1, y1), (fx0, fy0, fx1, fy1)) in enumerate(
        zip(int_boxes.tolist(), regions.tolist(), strict=True)
    ):
        if fx1 <= fx0 or fy1 <= fy0:
            crops.append(torch.zeros((fy1 - fy0, fx1 - fx0), dtype=torch.bool, device=masks.device))
            continue
        # The whole expanded box is resized, as paste_masks does, so that each
        # pixel is the same float; only the part inside the frame is kept.
        size = (max(y1 - y0 + 1, 1), max(x1 - x0 + 1, 1))
        res = F.interpolate(padded[i][None, None], size=size, mode="bilinear", align_corners=False)
        crops.append(res[0, 0, fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0] > threshold)
    return crops, regions
