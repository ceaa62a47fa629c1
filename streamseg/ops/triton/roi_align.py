"""RoIAlign forward and backward on the GPU (torchvision semantics).

One program computes ``BLOCK`` outputs ``(c, p, q)`` of one RoI, so the
RoI's geometry (start, bin size, sample grid) is scalar and the sample loops
have scalar bounds; the bilinear taps follow ``ops/csrc/roi_align`` and the
reference. The backward pass scatters each output gradient onto the taps
with atomic adds into a buffer of the accumulation dtype (float32 for half
and bfloat16, else the input's). Multi-level RoIAlign is the Python wrapper
:func:`streamseg.ops.multiscale_roi_align` over this op. A RoI whose batch
index is out of range pools zeros (the C++ kernel raises instead: checking
on the GPU would cost a device-to-host sync per call).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op, wrap_triton

from streamseg.ops import reference as _ref
from streamseg.ops._fake import roi_align_backward_fake, roi_align_fake
from streamseg.ops._launch import launch

__all__ = ["roi_align", "roi_align_backward"]

BLOCK = 128


@triton.jit
def _geometry(rois, k, scale, ph, pw, sampling_ratio, ALIGNED: tl.constexpr):
    """Batch index, bin starts and sizes, sample grid and sample count of RoI ``k``.

    ``scale`` points at the spatial scale in the RoIs' dtype (a Python float
    argument would arrive as float32).
    """
    roi = rois + k * 5
    scale = tl.load(scale)
    offset = 0.5 if ALIGNED else 0.0
    start_x = tl.load(roi + 1) * scale - offset
    start_y = tl.load(roi + 2) * scale - offset
    rw = tl.load(roi + 3) * scale - offset - start_x
    rh = tl.load(roi + 4) * scale - offset - start_y
    if not ALIGNED:
        rw = tl.maximum(rw, 1.0)
        rh = tl.maximum(rh, 1.0)
    bin_h = rh / ph
    bin_w = rw / pw
    if sampling_ratio > 0:
        grid_h = sampling_ratio
        grid_w = sampling_ratio
    else:
        grid_h = tl.math.ceil(rh / ph).to(tl.int32)
        grid_w = tl.math.ceil(rw / pw).to(tl.int32)
    count = tl.maximum(grid_h * grid_w, 1).to(start_x.dtype)
    batch = tl.load(roi).to(tl.int32)
    return batch, start_y, start_x, bin_h, bin_w, grid_h, grid_w, count


@triton.jit
def _tap(coord, size):
    """Bilinear neighbours (low, high) and weights of ``coord`` on an axis of ``size``."""
    inside = (coord >= -1.0) & (coord <= size)
    coord = tl.maximum(coord, 0.0)
    low = coord.to(tl.int32)
    edge = low >= size - 1
    low = tl.where(edge, size - 1, low)
    high = tl.where(edge, size - 1, low + 1)
    coord = tl.where(edge, low.to(coord.dtype), coord)
    frac = coord - low.to(coord.dtype)
    w_low = tl.where(inside, 1.0 - frac, 0.0)
    w_high = tl.where(inside, frac, 0.0)
    return low, high, w_low, w_high, inside


@triton.jit
def _forward_kernel(
    input,
    rois,
    out,
    scale,
    batch_size,
    channels,
    height,
    width,
    ph,
    pw,
    sampling_ratio,
    ALIGNED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    k = tl.program_id(0)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    per_roi = channels * ph * pw
    live = idx < per_roi
    q = idx % pw
    p = (idx // pw) % ph
    c = idx // (pw * ph)
    b, sy, sx, bh, bw, gh, gw, count = _geometry(rois, k, scale, ph, pw, sampling_ratio, ALIGNED)
    bv = b + tl.zeros([BLOCK], dtype=tl.int32)  # vector & scalar bool mis-types in the interpreter
    live = live & (bv >= 0) & (bv < batch_size)
    plane = input + (b * channels + c).to(tl.int64) * height * width
    acc = tl.zeros([BLOCK], dtype=sx.dtype)
    for iy in range(gh):
        y = (sy + p * bh) + (iy + 0.5) * bh / tl.maximum(gh, 1)
        y0, y1, wy0, wy1, _ = _tap(y, height)
        for ix in range(gw):
            x = (sx + q * bw) + (ix + 0.5) * bw / tl.maximum(gw, 1)
            x0, x1, wx0, wx1, _ = _tap(x, width)
            v00 = tl.load(plane + y0 * width + x0, mask=live, other=0).to(acc.dtype)
            v01 = tl.load(plane + y0 * width + x1, mask=live, other=0).to(acc.dtype)
            v10 = tl.load(plane + y1 * width + x0, mask=live, other=0).to(acc.dtype)
            v11 = tl.load(plane + y1 * width + x1, mask=live, other=0).to(acc.dtype)
            acc += wy0 * wx0 * v00 + wy0 * wx1 * v01 + wy1 * wx0 * v10 + wy1 * wx1 * v11
    dest = out + k.to(tl.int64) * per_roi + idx
    tl.store(dest, (acc / count).to(out.dtype.element_ty), mask=idx < per_roi)


@triton.jit
def _backward_kernel(
    grad,
    rois,
    grad_input,
    scale,
    batch_size,
    channels,
    height,
    width,
    ph,
    pw,
    sampling_ratio,
    ALIGNED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    k = tl.program_id(0)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    per_roi = channels * ph * pw
    q = idx % pw
    p = (idx // pw) % ph
    c = idx // (pw * ph)
    b, sy, sx, bh, bw, gh, gw, count = _geometry(rois, k, scale, ph, pw, sampling_ratio, ALIGNED)
    bv = b + tl.zeros([BLOCK], dtype=tl.int32)  # vector & scalar bool mis-types in the interpreter
    live = (idx < per_roi) & (bv >= 0) & (bv < batch_size)
    g = tl.load(grad + k.to(tl.int64) * per_roi + idx, mask=live, other=0)
    g = g.to(sx.dtype) / count
    plane = grad_input + (b * channels + c).to(tl.int64) * height * width
    for iy in range(gh):
        y = (sy + p * bh) + (iy + 0.5) * bh / tl.maximum(gh, 1)
        y0, y1, wy0, wy1, y_in = _tap(y, height)
        for ix in range(gw):
            x = (sx + q * bw) + (ix + 0.5) * bw / tl.maximum(gw, 1)
            x0, x1, wx0, wx1, x_in = _tap(x, width)
            m = live & y_in & x_in
            tl.atomic_add(plane + y0 * width + x0, g * wy0 * wx0, mask=m)
            tl.atomic_add(plane + y0 * width + x1, g * wy0 * wx1, mask=m)
            tl.atomic_add(plane + y1 * width + x0, g * wy1 * wx0, mask=m)
            tl.atomic_add(plane + y1 * width + x1, g * wy1 * wx1, mask=m)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _scale(value: float, like: Tensor) -> Tensor:
    return torch.full((1,), value, dtype=_acc_dtype(like.dtype), device=like.device)


@triton_op("streamseg_triton::roi_align", mutates_args=())
def roi_align(
    input: Tensor,
    rois: Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    """``input (B, C, H, W)``, ``rois (K, 5)`` -> ``(K, C, pooled_height, pooled_width)``."""
    k, channels = rois.shape[0], input.shape[1]
    height, width = input.shape[2], input.shape[3]
    out = input.new_zeros((k, channels, pooled_height, pooled_width))
    if out.numel() == 0 or height == 0 or width == 0:
        return out
    per_roi = channels * pooled_height * pooled_width

    def kernel() -> Tensor:
        wrap_triton(_forward_kernel)[(k, triton.cdiv(per_roi, BLOCK))](
            input.contiguous(),
            rois.to(_acc_dtype(input.dtype)).contiguous(),
            out,
            _scale(spatial_scale, input),
            input.shape[0],
            channels,
            height,
            width,
            pooled_height,
            pooled_width,
            sampling_ratio,
            ALIGNED=aligned,
            BLOCK=BLOCK,
        )
        return out

    size = (pooled_height, pooled_width)
    return launch(
        "roi_align",
        input,
        kernel,
        lambda: _ref.roi_align(input, rois, size, spatial_scale, sampling_ratio, aligned),
    )


@triton_op("streamseg_triton::roi_align_backward", mutates_args=())
def roi_align_backward(
    grad: Tensor,
    rois: Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    batch_size: int,
    channels: int,
    height: int,
    width: int,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    """Gradient ``(B, C, H, W)`` of :func:`roi_align`'s input from ``grad (K, C, ph, pw)``."""
    acc = _acc_dtype(grad.dtype)
    grad_input = grad.new_zeros((batch_size, channels, height, width), dtype=acc)
    k = rois.shape[0]
    if grad.numel() == 0 or height == 0 or width == 0:
        return grad_input.to(grad.dtype)

    def kernel() -> Tensor:
        per_roi = channels * pooled_height * pooled_width
        wrap_triton(_backward_kernel)[(k, triton.cdiv(per_roi, BLOCK))](
            grad.contiguous(),
            rois.to(acc).contiguous(),
            grad_input,
            _scale(spatial_scale, grad),
            batch_size,
            channels,
            height,
            width,
            pooled_height,
            pooled_width,
            sampling_ratio,
            ALIGNED=aligned,
            BLOCK=BLOCK,
        )
        return grad_input.to(grad.dtype)

    def reference() -> Tensor:
        # RoIAlign is linear in its input: its gradient is the vector-Jacobian
        # product at any input, zeros included.
        x = grad.new_zeros((batch_size, channels, height, width)).requires_grad_()
        with torch.enable_grad():
            out = _ref.roi_align(
                x, rois, (pooled_height, pooled_width), spatial_scale, sampling_ratio, aligned
            )
        return torch.autograd.grad(out, x, grad)[0]

    return launch("roi_align_backward", grad, kernel, reference)


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    input, rois, scale, ph, pw, sampling_ratio, aligned = inputs
    ctx.save_for_backward(rois)
    ctx.input_shape = tuple(input.shape)
    ctx.params = (scale, ph, pw, sampling_ratio, aligned)


def _backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
    (rois,) = ctx.saved_tensors
    scale, ph, pw, sampling_ratio, aligned = ctx.params
    b, c, h, w = ctx.input_shape
    grad_input = roi_align_backward(grad, rois, scale, ph, pw, b, c, h, w, sampling_ratio, aligned)
    return grad_input, None, None, None, None, None, None


roi_align.register_autograd(_backward, setup_context=_setup)
roi_align.register_fake(roi_align_fake)
roi_align_backward.register_fake(roi_align_backward_fake)
