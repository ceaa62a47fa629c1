"""NMS and batched NMS on the GPU: an IoU bit-mask kernel and a scan kernel.

The boxes are sorted by score (stable, decreasing) with ``torch.sort``.
``_suppression_kernel`` then fills, for every sorted box ``i``, a row of
64-bit words whose bit ``j`` says that ``i`` suppresses the later box ``j``
(same category and IoU ``> threshold``); one program covers a 64 x 64 tile.
``_scan_kernel`` runs the greedy pass on the device, so the mask never
crosses to the host: one program holds the "removed" words of all boxes in
registers and walks the boxes 64 at a time: the boxes of a block settle
each other in a short scalar loop over the block's own word, then the rows
of its kept boxes are or-ed into the removed words at once. ``torch.nonzero``
of the keep flags gives the result.

The IoU is computed with the C++ kernel's formula and operation order and
launched with ``enable_fp_fusion=False`` (no multiply-add contraction), so
its comparisons with the threshold agree with the CPU bit for bit.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op, wrap_triton

from streamseg.ops import reference as _ref
from streamseg.ops._fake import batched_nms_fake, nms_fake
from streamseg.ops._launch import launch

__all__ = ["MAX_BOXES", "batched_nms", "nms"]

WORD = 64
# The scan keeps N / 64 words in the registers of one program; beyond this
# the public ops use the PyTorch reference (the mask alone would be 512 MiB).
MAX_BOXES = 64 * 1024


@triton.jit
def _suppression_kernel(boxes, cls, n, words, thr, mask, HAS_CLS: tl.constexpr, WORD: tl.constexpr):
    row_block = tl.program_id(0)
    col_block = tl.program_id(1)
    i = row_block * WORD + tl.arange(0, WORD)
    j = col_block * WORD + tl.arange(0, WORD)
    ri = i < n
    rj = j < n
    ax1 = tl.load(boxes + i * 4 + 0, mask=ri, other=0)
    ay1 = tl.load(boxes + i * 4 + 1, mask=ri, other=0)
    ax2 = tl.load(boxes + i * 4 + 2, mask=ri, other=0)
    ay2 = tl.load(boxes + i * 4 + 3, mask=ri, other=0)
    bx1 = tl.load(boxes + j * 4 + 0, mask=rj, other=0)
    by1 = tl.load(boxes + j * 4 + 1, mask=rj, other=0)
    bx2 = tl.load(boxes + j * 4 + 2, mask=rj, other=0)
    by2 = tl.load(boxes + j * 4 + 3, mask=rj, other=0)
    area_a = (ax2 - ax1) * (ay2 - ay1)
    area_b = (bx2 - bx1) * (by2 - by1)
    w = tl.minimum(ax2[:, None], bx2[None, :]) - tl.maximum(ax1[:, None], bx1[None, :])
    h = tl.minimum(ay2[:, None], by2[None, :]) - tl.maximum(ay1[:, None], by1[None, :])
    inter = tl.maximum(w, 0.0) * tl.maximum(h, 0.0)
    iou = inter / (area_a[:, None] + area_b[None, :] - inter)
    hit = (iou > tl.load(thr)) & (j[None, :] > i[:, None]) & rj[None, :]
    if HAS_CLS:
        ci = tl.load(cls + i, mask=ri, other=0)
        cj = tl.load(cls + j, mask=rj, other=0)
        hit = hit & (ci[:, None] == cj[None, :])
    one = tl.full([WORD, WORD], 1, tl.int64)
    bits = tl.where(hit, one << tl.arange(0, WORD).to(tl.int64)[None, :], 0)
    # Distinct powers of two: their sum is their bitwise or.
    tl.store(mask + i.to(tl.int64) * words + col_block, tl.sum(bits, axis=1), mask=ri)


@triton.jit
def _or_halves(x, HALF: tl.constexpr, BLOCK: tl.constexpr):
    """``(2 * HALF, BLOCK)`` -> ``(HALF, BLOCK)``: rows ``2r`` and ``2r + 1`` or-ed."""
    a, b = tl.split(tl.permute(tl.reshape(x, [HALF, 2, BLOCK]), (0, 2, 1)))
    return a | b


@triton.jit
def _or_rows(x, BLOCK: tl.constexpr):
    """Bitwise or of the 64 rows of ``x (64, BLOCK)`` (a tree: the interpreter has no fast
    or-reduction)."""
    x = _or_halves(x, 32, BLOCK)
    x = _or_halves(x, 16, BLOCK)
    x = _or_halves(x, 8, BLOCK)
    x = _or_halves(x, 4, BLOCK)
    x = _or_halves(x, 2, BLOCK)
    x = _or_halves(x, 1, BLOCK)
    return tl.reshape(x, [BLOCK])


@triton.jit
def _scan_kernel(mask, keep, n, words, BLOCK: tl.constexpr, WORD: tl.constexpr):
    # One program walks the sorted boxes 64 at a time. ``removed`` holds the
    # words of every box suppressed by a kept box of the blocks before.
    offs = tl.arange(0, BLOCK)
    lane = tl.arange(0, WORD)
    removed = tl.zeros([BLOCK], dtype=tl.int64)
    for b in range(words):
        cur = tl.sum(tl.where(offs == b, removed, 0))
        # Within the block, decisions depend on each other: box t, when it
        # is still in, removes the later boxes of its own word.
        for t in range(WORD):
            i = b * WORD + t
            row = tl.load(mask + i.to(tl.int64) * words + b, mask=i < n, other=0)
            cur = tl.where(((cur >> t) & 1) == 0, cur | row, cur)
        i = b * WORD + lane
        in_range = i < n
        kept = (((cur >> lane.to(tl.int64)) & 1) == 0) & in_range
        tl.store(keep + i, kept, mask=in_range)
        # The kept boxes' rows join ``removed`` for the blocks after.
        rows = tl.load(
            mask + i.to(tl.int64)[:, None] * words + offs[None, :],
            mask=kept[:, None] & (offs[None, :] < words),
            other=0,
        )
        removed = removed | _or_rows(rows, BLOCK)


def _keep_sorted(sorted_boxes: Tensor, sorted_cls: Tensor | None, iou_threshold: float) -> Tensor:
    """Keep flags ``(N,)`` bool of boxes already sorted by decreasing score."""
    n = sorted_boxes.shape[0]
    words = triton.cdiv(n, WORD)
    mask = torch.empty((n, words), dtype=torch.int64, device=sorted_boxes.device)
    keep = torch.empty((n,), dtype=torch.bool, device=sorted_boxes.device)
    if n == 0:
        return keep
    cls = sorted_cls if sorted_cls is not None else sorted_boxes
    # Scalars travel as tensors of the boxes' dtype: a Python float would be
    # passed as float32, and float64 boxes must compare with a float64 threshold.
    thr = torch.full((1,), iou_threshold, dtype=sorted_boxes.dtype, device=sorted_boxes.device)
    wrap_triton(_suppression_kernel)[(words, words)](
        sorted_boxes,
        cls,
        n,
        words,
        thr,
        mask,
        HAS_CLS=sorted_cls is not None,
        WORD=WORD,
        enable_fp_fusion=False,
    )
    block = max(triton.next_power_of_2(words), 16)
    wrap_triton(_scan_kernel)[(1,)](mask, keep, n, words, BLOCK=block, WORD=WORD, num_warps=4)
    return keep


def _nms(boxes: Tensor, scores: Tensor, idxs: Tensor | None, iou_threshold: float) -> Tensor:
    if boxes.shape[0] > MAX_BOXES:
        return _reference(boxes, scores, idxs, iou_threshold)
    order = torch.sort(scores, stable=True, descending=True)[1]
    sorted_boxes = boxes.index_select(0, order).contiguous()
    sorted_cls = None if idxs is None else idxs.index_select(0, order).to(torch.int64)
    return launch(
        "nms" if idxs is None else "batched_nms",
        boxes,
        lambda: order[_keep_sorted(sorted_boxes, sorted_cls, iou_threshold)],
        lambda: _reference(boxes, scores, idxs, iou_threshold),
    )


def _reference(boxes: Tensor, scores: Tensor, idxs: Tensor | None, iou_threshold: float) -> Tensor:
    if idxs is None:
        return _ref.nms(boxes, scores, iou_threshold)
    return _ref.batched_nms(boxes, scores, idxs, iou_threshold)


@triton_op("streamseg_triton::nms", mutates_args=())
def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """``(K,)`` int64 indices kept by greedy NMS of ``boxes (N, 4)`` xyxy, ``scores (N,)``."""
    return _nms(boxes, scores, None, iou_threshold)


@triton_op("streamseg_triton::batched_nms", mutates_args=())
def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """As :func:`nms`, boxes of different ``idxs (N,)`` never suppressing each other."""
    return _nms(boxes, scores, idxs, iou_threshold)


# The output length depends on the data: the fakes give it an unbacked size
# instead of tracing the wrappers' ``torch.nonzero``.
nms.register_fake(nms_fake)
batched_nms.register_fake(batched_nms_fake)
