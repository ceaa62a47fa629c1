"""Mask paste in batched tensor expressions (the PyTorch reference), frame-size or as crops.

torchvision's ``paste_masks_in_image``: each ``(M, M)`` mask is padded by
``padding`` zeros, resized bilinearly (``F.interpolate``, ``align_corners=
False``) onto its box expanded by ``(M + 2 * padding) / M`` and truncated
to integers, and written where that box overlaps the frame.

Every output pixel is computed on its own from its four source taps, with
``F.interpolate``'s coordinate rule and the C++ kernel's operation order
(the two rows' horizontal blends, then the vertical one, in the masks'
``opmath`` type), so the floats are the ones the C++ and Triton kernels
write, bit for bit. There is no loop over masks: the frame-size paste is
``(N, h, w)`` tensor expressions, and the crops are one flat buffer in
which every pixel finds its mask and position by its offset
(:func:`paste_masks_packed`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "paste_boxes",
    "paste_masks",
    "paste_masks_binary",
    "paste_masks_crops",
    "paste_masks_packed",
    "paste_masks_packed_loop",
    "paste_regions",
]


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


def paste_regions(int_boxes: Tensor, image_size: tuple[int, int] | Tensor) -> Tensor:
    """Where pasted masks can be non-zero: ``(N, 4)`` int64 ``x0, y0, x1, y1`` (exclusive).

    The inclusive ``int_boxes`` of :func:`paste_boxes` clipped to the frame
    (``(h, w)``, or ``(N, 2)`` int64 per mask); a box outside the frame
    becomes an empty region on the nearest edge.
    """
    if isinstance(image_size, Tensor):
        h, w = image_size[:, 0], image_size[:, 1]
        x0 = torch.minimum(int_boxes[:, 0].clamp(min=0), w)
        y0 = torch.minimum(int_boxes[:, 1].clamp(min=0), h)
        x1 = torch.maximum(torch.minimum(int_boxes[:, 2] + 1, w), x0)
        y1 = torch.maximum(torch.minimum(int_boxes[:, 3] + 1, h), y0)
    else:
        hh, ww = image_size
        x0 = int_boxes[:, 0].clamp(0, ww)
        y0 = int_boxes[:, 1].clamp(0, hh)
        x1 = torch.maximum((int_boxes[:, 2] + 1).clamp(max=ww), x0)
        y1 = torch.maximum((int_boxes[:, 3] + 1).clamp(max=hh), y0)
    return torch.stack((x0, y0, x1, y1), dim=1)


def _opmath(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _taps(dst: Tensor, in_size: int, out_size: Tensor, dtype: torch.dtype) -> tuple[Tensor, ...]:
    """``F.interpolate``'s source taps (``i0, i1, w0, w1``) of output index ``dst``
    when resizing ``in_size`` -> ``out_size`` (any broadcastable shapes)."""
    out = out_size.to(dtype)
    scale = torch.full_like(out, float(in_size)) / out  # not in_size / out: that is a reciprocal
    src = (scale * (dst.to(dtype) + 0.5) - 0.5).clamp(min=0)
    i0 = src.floor().long().clamp(max=in_size - 1)
    lam = (src - i0.to(dtype)).clamp(0, 1)
    i1 = torch.where(i0 < in_size - 1, i0 + 1, i0)
    return i0, i1, 1.0 - lam, lam


def _sample(padded: Tensor, mask: Tensor, ys: tuple[Tensor, ...], xs: tuple[Tensor, ...]) -> Tensor:
    """Blend of ``padded (N, P, P)`` at the taps ``ys`` and ``xs`` of mask index ``mask``
    (all broadcast to the output's shape): rows first, as the C++ kernel."""
    y0, y1, wy0, wy1 = ys
    x0, x1, wx0, wx1 = xs
    side = padded.shape[-1]
    flat = padded.reshape(-1)
    base = mask * (side * side)
    r0 = base + y0 * side
    r1 = base + y1 * side
    top = flat[r0 + x0] * wx0 + flat[r0 + x1] * wx1
    bottom = flat[r1 + x0] * wx0 + flat[r1 + x1] * wx1
    return top * wy0 + bottom * wy1


def _padded(masks: Tensor, padding: int) -> Tensor:
    return F.pad(masks.to(_opmath(masks.dtype)), (padding,) * 4)


def paste_masks(
    masks: Tensor, boxes: Tensor, image_size: tuple[int, int], padding: int = 1
) -> Tensor:
    """torchvision's ``paste_masks_in_image``: ``(N, M, M)`` probabilities -> ``(N, h, w)``.

    0 outside each mask's expanded box; the caller thresholds.
    """
    h, w = image_size
    n, m = masks.shape[0], masks.shape[-1]
    if n * h * w == 0:
        return masks.new_zeros((n, h, w))
    dtype = _opmath(masks.dtype)
    ib = paste_boxes(boxes, m, padding)
    region = paste_regions(ib, (h, w))
    mp = m + 2 * padding
    ys = torch.arange(h, device=masks.device)[None, :]
    xs = torch.arange(w, device=masks.device)[None, :]
    y0, y1, wy0, wy1 = _taps(ys - ib[:, 1:2], mp, (ib[:, 3:4] - ib[:, 1:2] + 1).clamp(min=1), dtype)
    x0, x1, wx0, wx1 = _taps(xs - ib[:, 0:1], mp, (ib[:, 2:3] - ib[:, 0:1] + 1).clamp(min=1), dtype)
    # Each padded row blended horizontally at every frame column, (N, mp, w)...
    padded = _padded(masks, padding)
    cols = padded.gather(2, x0[:, None, :].expand(n, mp, w)) * wx0[:, None, :]
    cols = cols + padded.gather(2, x1[:, None, :].expand(n, mp, w)) * wx1[:, None, :]
    # ...then the two rows of every frame row blended vertically, (N, h, w).
    top = cols.gather(1, y0[:, :, None].expand(n, h, w))
    bottom = cols.gather(1, y1[:, :, None].expand(n, h, w))
    value = top * wy0[:, :, None] + bottom * wy1[:, :, None]
    r = region[:, :, None, None]
    inside = (ys[:, :, None] >= r[:, 1]) & (ys[:, :, None] < r[:, 3])
    inside = inside & (xs[:, None, :] >= r[:, 0]) & (xs[:, None, :] < r[:, 2])
    return torch.where(inside, value, 0.0).to(masks.dtype)


def paste_masks_binary(
    masks: Tensor,
    boxes: Tensor,
    image_size: tuple[int, int],
    threshold: float = 0.5,
    padding: int = 1,
) -> Tensor:
    """:func:`paste_masks` thresholded: ``(N, h, w)`` bool, ``probability > threshold``."""
    return paste_masks(masks, boxes, image_size, padding) > threshold


def paste_masks_packed(
    masks: Tensor,
    boxes: Tensor,
    regions: Tensor,
    total: int,
    threshold: float = 0.5,
    padding: int = 1,
) -> Tensor:
    """The thresholded paste of each mask inside its region, all regions in one flat buffer.

    Args:
        masks: ``(N, M, M)`` float probabilities.
        boxes: ``(N, 4)`` float xyxy frame pixels.
        regions: ``(N, 4)`` int64 from :func:`paste_regions` of these boxes.
        total: the sum of the regions' areas (the caller knows it on the
            host: passing it keeps this function free of syncs).
        threshold, padding: as :func:`paste_masks_binary`.

    Returns:
        ``(total,)`` bool: region ``i``'s ``(y1 - y0, x1 - x0)`` pixels row by
        row, after those of the regions before it; equal to
        ``paste_masks_binary(...)[i, y0:y1, x0:x1]``.
    """
    n, m = masks.shape[0], masks.shape[-1]
    if total == 0 or n == 0:
        return torch.zeros(total, dtype=torch.bool, device=masks.device)
    dtype = _opmath(masks.dtype)
    ib = paste_boxes(boxes, m, padding)
    width = regions[:, 2] - regions[:, 0]
    area = width * (regions[:, 3] - regions[:, 1])
    owner = torch.repeat_interleave(torch.arange(n, device=masks.device), area, output_size=total)
    local = torch.arange(total, device=masks.device) - (torch.cumsum(area, 0) - area)[owner]
    row = torch.div(local, width[owner].clamp(min=1), rounding_mode="floor")
    col = local - row * width[owner]
    ib_o = ib[owner]
    out_h = (ib_o[:, 3] - ib_o[:, 1] + 1).clamp(min=1)
    out_w = (ib_o[:, 2] - ib_o[:, 0] + 1).clamp(min=1)
    mp = m + 2 * padding
    value = _sample(
        _padded(masks, padding),
        owner,
        _taps(regions[owner, 1] + row - ib_o[:, 1], mp, out_h, dtype),
        _taps(regions[owner, 0] + col - ib_o[:, 0], mp, out_w, dtype),
    )
    return value.to(masks.dtype) > threshold


def paste_masks_packed_loop(
    masks: Tensor,
    boxes: Tensor,
    regions: Tensor,
    total: int,
    threshold: float = 0.5,
    padding: int = 1,
) -> Tensor:
    """:func:`paste_masks_packed` one mask at a time (``F.interpolate`` onto its box):
    the CPU's way, where a loop costs no kernel launch and the interpolation of
    each box is cheaper than four gathers per pixel. The same bits."""
    if total == 0 or masks.shape[0] == 0:
        return torch.zeros(total, dtype=torch.bool, device=masks.device)
    padded = _padded(masks, padding).to(masks.dtype)
    int_boxes = paste_boxes(boxes, masks.shape[-1], padding).tolist()
    parts = []
    for i, ((x0, y0, x1, y1), (fx0, fy0, fx1, fy1)) in enumerate(
        zip(int_boxes, regions.tolist(), strict=True)
    ):
        if fx1 <= fx0 or fy1 <= fy0:
            continue
        size = (max(y1 - y0 + 1, 1), max(x1 - x0 + 1, 1))
        res = F.interpolate(padded[i][None, None], size=size, mode="bilinear", align_corners=False)
        parts.append((res[0, 0, fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0] > threshold).reshape(-1))
    return torch.cat(parts)


def paste_masks_crops(
    masks: Tensor,
    boxes: Tensor,
    image_size: tuple[int, int],
    threshold: float = 0.5,
    padding: int = 1,
    *,
    packed: Callable[..., Tensor] | None = None,
) -> tuple[list[Tensor], Tensor]:
    """:func:`paste_masks_binary` written only where each mask can be set.

    Returns ``(crops, regions)``: ``regions`` ``(N, 4)`` int64 ``x0, y0, x1,
    y1`` (exclusive, inside the frame) from :func:`paste_regions`, and
    ``crops[i]`` bool ``(y1 - y0, x1 - x0)``, equal to
    ``paste_masks_binary(...)[i, y0:y1, x0:x1]``: views of one
    :func:`paste_masks_packed` buffer (or ``packed``'s, e.g.
    :func:`paste_masks_packed_loop`). The cost follows the boxes' area.
    """
    regions = paste_regions(paste_boxes(boxes, masks.shape[-1], padding), image_size)
    shapes = torch.stack((regions[:, 3] - regions[:, 1], regions[:, 2] - regions[:, 0]), 1)
    sizes = shapes.tolist()  # host sync: the crops' shapes
    total = sum(h * w for h, w in sizes)
    flat = (packed or paste_masks_packed)(masks, boxes, regions, total, threshold, padding)
    parts = flat.split([h * w for h, w in sizes])
    return [p.view(h, w) for p, (h, w) in zip(parts, sizes, strict=True)], regions
