"""Mask paste on the GPU: probabilities, or thresholded to bool in the same pass.

The integer boxes the padded masks are resized onto (torchvision's
``expand_boxes`` then truncation) are a few torch operations on the device;
a box with a non-finite coordinate pastes nothing, as on the CPU. The
output starts as the value outside every box (0; for the binary paste
``0 > threshold``); one program covers a tile of one mask's frame and,
when the tile meets the box, writes the bilinear resize of the padded mask
(``align_corners=False``, as ``F.interpolate``) inside the box. The binary
paste rounds the probability to the masks' dtype before comparing, so it
equals ``paste_masks(...) > threshold``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op, wrap_triton

from streamseg.ops import reference as _ref
from streamseg.ops._fake import paste_masks_binary_fake, paste_masks_fake
from streamseg.ops._launch import launch

__all__ = ["int_boxes", "paste_masks", "paste_masks_binary"]

TILE_Y = 32
TILE_X = 64


@triton.jit
def _resize_tap(dst, in_size, out_size, ACC: tl.constexpr):
    """``F.interpolate``'s source taps ``(i0, i1, w0, w1)`` of output index ``dst``."""
    scale = in_size.to(ACC) / out_size.to(ACC)
    src = tl.maximum(scale * (dst.to(ACC) + 0.5) - 0.5, 0.0)
    i0 = tl.minimum(tl.floor(src).to(tl.int32), in_size - 1)
    lam = tl.minimum(tl.maximum(src - i0.to(ACC), 0.0), 1.0)
    i1 = tl.where(i0 < in_size - 1, i0 + 1, i0)
    return i0, i1, 1.0 - lam, lam


@triton.jit
def _paste_kernel(
    masks,
    boxes,
    out,
    thr,
    m,
    pad,
    height,
    width,
    BINARY: tl.constexpr,
    TILE_Y: tl.constexpr,
    TILE_X: tl.constexpr,
):
    # Program (k, ty, tx) covers one TILE_Y x TILE_X tile of mask k's frame.
    # The output starts as the outside value: a tile that misses the box writes nothing.
    k = tl.program_id(0)
    x0 = tl.load(boxes + k * 4 + 0)
    y0 = tl.load(boxes + k * 4 + 1)
    x1 = tl.load(boxes + k * 4 + 2)
    y1 = tl.load(boxes + k * 4 + 3)
    top = tl.program_id(1) * TILE_Y
    left = tl.program_id(2) * TILE_X
    # float64 masks are computed in float64, the others in float32.
    ACC: tl.constexpr = tl.float64 if masks.dtype.element_ty == tl.float64 else tl.float32
    if (top <= y1) & (top + TILE_Y > y0) & (left <= x1) & (left + TILE_X > x0):
        y = top + tl.arange(0, TILE_Y)[:, None]
        x = left + tl.arange(0, TILE_X)[None, :]
        in_frame = (y < height) & (x < width)
        inside = in_frame & (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        mp = m + 2 * pad
        cx0, cx1, wx0, wx1 = _resize_tap(x - x0, mp, tl.maximum(x1 - x0 + 1, 1), ACC)
        ry0, ry1, wy0, wy1 = _resize_tap(y - y0, mp, tl.maximum(y1 - y0 + 1, 1), ACC)
        # Taps in the padding read 0: shift into the unpadded mask and mask off.
        r0, r1, c0, c1 = ry0 - pad, ry1 - pad, cx0 - pad, cx1 - pad
        ok_r0 = inside & (r0 >= 0) & (r0 < m)
        ok_r1 = inside & (r1 >= 0) & (r1 < m)
        ok_c0 = (c0 >= 0) & (c0 < m)
        ok_c1 = (c1 >= 0) & (c1 < m)
        mask = masks + k.to(tl.int64) * m * m
        v00 = tl.load(mask + r0 * m + c0, mask=ok_r0 & ok_c0, other=0).to(ACC)
        v01 = tl.load(mask + r0 * m + c1, mask=ok_r0 & ok_c1, other=0).to(ACC)
        v10 = tl.load(mask + r1 * m + c0, mask=ok_r1 & ok_c0, other=0).to(ACC)
        v11 = tl.load(mask + r1 * m + c1, mask=ok_r1 & ok_c1, other=0).to(ACC)
        value = (v00 * wx0 + v01 * wx1) * wy0 + (v10 * wx0 + v11 * wx1) * wy1
        dest = out + k.to(tl.int64) * height * width + y * width + x
        if BINARY:
            rounded = value.to(masks.dtype.element_ty).to(ACC)
            tl.store(dest, rounded > tl.load(thr).to(ACC), mask=inside)
        else:
            tl.store(dest, value.to(out.dtype.element_ty), mask=inside)


def int_boxes(boxes: Tensor, mask_size: int, padding: int) -> Tensor:
    """``(N, 4)`` int32 inclusive boxes ``x0, y0, x1, y1`` of the padded masks.

    A box with a non-finite (or huge) coordinate becomes ``(0, 0, -1, -1)``,
    which pastes nothing.
    """
    scale = float(mask_size + 2 * padding) / mask_size
    w_half = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale
    h_half = (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    x_c = (boxes[:, 2] + boxes[:, 0]) * 0.5
    y_c = (boxes[:, 3] + boxes[:, 1]) * 0.5
    expanded = torch.stack((x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half), dim=1)
    # Beyond +-2**30 a box covers any frame: clamping keeps it, in int32.
    limit = float(2**30)
    ok = torch.isfinite(expanded).all(dim=1, keepdim=True)
    ints = expanded.double().clamp(-limit, limit).to(torch.int64).to(torch.int32)
    nothing = torch.tensor([0, 0, -1, -1], dtype=torch.int32, device=boxes.device)
    return torch.where(ok, ints, nothing)


def _paste(
    masks: Tensor, boxes: Tensor, out: Tensor, padding: int, threshold: float, binary: bool
) -> Tensor:
    n, height, width = out.shape
    if out.numel() == 0:
        return out
    m = masks.shape[1]
    # The threshold in the masks' dtype, as `paste_masks(...) > threshold` compares.
    thr = torch.full((1,), threshold, dtype=masks.dtype, device=masks.device)
    grid = (n, triton.cdiv(height, TILE_Y), triton.cdiv(width, TILE_X))
    wrap_triton(_paste_kernel)[grid](
        masks.contiguous(),
        int_boxes(boxes, m, padding),
        out,
        thr,
        m,
        padding,
        height,
        width,
        BINARY=binary,
        TILE_Y=TILE_Y,
        TILE_X=TILE_X,
    )
    return out


@triton_op("streamseg_triton::paste_masks", mutates_args=())
def paste_masks(masks: Tensor, boxes: Tensor, height: int, width: int, padding: int) -> Tensor:
    """``masks (N, M, M)`` probabilities on ``boxes (N, 4)`` xyxy -> ``(N, height, width)``."""
    out = masks.new_zeros((masks.shape[0], height, width))
    return launch(
        "paste_masks",
        masks,
        lambda: _paste(masks, boxes, out, padding, 0.0, binary=False),
        lambda: _ref.paste_masks(masks, boxes, (height, width), padding),
    )


@triton_op("streamseg_triton::paste_masks_binary", mutates_args=())
def paste_masks_binary(
    masks: Tensor, boxes: Tensor, height: int, width: int, padding: int, threshold: float
) -> Tensor:
    """As :func:`paste_masks`, then ``> threshold``: ``(N, height, width)`` bool."""
    # Outside the boxes the probability is 0, which passes a negative threshold.
    outside = bool(torch.tensor(threshold, dtype=masks.dtype) < 0)
    out = masks.new_full((masks.shape[0], height, width), outside, dtype=torch.bool)
    return launch(
        "paste_masks_binary",
        masks,
        lambda: _paste(masks, boxes, out, padding, threshold, binary=True),
        lambda: _ref.paste_masks_binary(masks, boxes, (height, width), threshold, padding),
    )


paste_masks.register_fake(paste_masks_fake)
paste_masks_binary.register_fake(paste_masks_binary_fake)
