"""Box decoding on the GPU (torchvision's ``BoxCoder.decode``) in one kernel.

The reference is a dozen torch operations, each a kernel and a temporary on
a GPU; here one program decodes ``BLOCK`` (box, class) pairs with the
reference's operation order. Weights and clamp travel as a tensor of the
deltas' dtype (a Python float argument would arrive as float32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op, wrap_triton

from streamseg.ops import reference as _ref
from streamseg.ops._fake import decode_boxes_fake
from streamseg.ops._launch import launch
from streamseg.ops.transfer import to_device

__all__ = ["decode_boxes"]

BLOCK = 256


@triton.jit
def _decode_kernel(deltas, boxes, coder, out, total, classes, BLOCK: tl.constexpr):
    # ``coder``: wx, wy, ww, wh, clamp. Not ``params``: Triton's launcher binds the
    # arguments in a generated function whose own ``params`` would replace it.
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = idx < total
    row = (idx // classes).to(tl.int64)
    d = deltas + idx.to(tl.int64) * 4
    b = boxes + row * 4
    x1 = tl.load(b + 0, mask=live, other=0)
    y1 = tl.load(b + 1, mask=live, other=0)
    width = tl.load(b + 2, mask=live, other=0) - x1
    height = tl.load(b + 3, mask=live, other=0) - y1
    ctr_x = x1 + 0.5 * width
    ctr_y = y1 + 0.5 * height
    clamp = tl.load(coder + 4)
    dx = tl.load(d + 0, mask=live, other=0) / tl.load(coder + 0)
    dy = tl.load(d + 1, mask=live, other=0) / tl.load(coder + 1)
    dw = tl.minimum(tl.load(d + 2, mask=live, other=0) / tl.load(coder + 2), clamp)
    dh = tl.minimum(tl.load(d + 3, mask=live, other=0) / tl.load(coder + 3), clamp)
    px = dx * width + ctr_x
    py = dy * height + ctr_y
    half_w = 0.5 * (tl.exp(dw) * width)
    half_h = 0.5 * (tl.exp(dh) * height)
    o = out + idx.to(tl.int64) * 4
    tl.store(o + 0, px - half_w, mask=live)
    tl.store(o + 1, py - half_h, mask=live)
    tl.store(o + 2, px + half_w, mask=live)
    tl.store(o + 3, py + half_h, mask=live)


def _decode(deltas: Tensor, boxes: Tensor, coder: Tensor, out: Tensor) -> Tensor:
    total = out.shape[0] * out.shape[1]
    wrap_triton(_decode_kernel)[(triton.cdiv(total, BLOCK),)](
        deltas.contiguous(),
        boxes.to(deltas.dtype).contiguous(),
        coder,
        out,
        total,
        out.shape[1],
        BLOCK=BLOCK,
    )
    return out


@triton_op("streamseg_triton::decode_boxes", mutates_args=())
def decode_boxes(
    deltas: Tensor, boxes: Tensor, wx: float, wy: float, ww: float, wh: float, clamp: float
) -> Tensor:
    """``deltas (N, 4k)`` on ``boxes (N, 4)`` xyxy -> ``(N, k, 4)`` xyxy."""
    n, classes = deltas.shape[0], deltas.shape[1] // 4
    out = deltas.new_empty((n, classes, 4))
    if n * classes == 0:
        return out
    # Non-blocking from pinned memory: a blocking copy would be a host sync per call.
    coder = to_device(torch.tensor([wx, wy, ww, wh, clamp], dtype=deltas.dtype), deltas.device)
    return launch(
        "decode_boxes",
        deltas,
        lambda: _decode(deltas, boxes, coder, out),
        lambda: _ref.decode_boxes(deltas, boxes, (wx, wy, ww, wh), clamp),
    )


decode_boxes.register_fake(decode_boxes_fake)
