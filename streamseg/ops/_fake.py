"""Fake (meta) kernels and autograd of the ``torch.ops.streamseg`` custom ops.

The fakes give output shapes and dtypes without computing, so that
``torch.compile`` and ``torch.export`` trace through the native ops; ops whose
output length depends on the data (NMS, RLE) return an unbacked size.
:func:`register` runs once, right after the native library loaded (the ops
must exist first); importing this module registers nothing. The Triton
ops (:mod:`streamseg.ops.triton`) take the same arguments and register
these same shape functions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "batched_nms_fake",
    "decode_boxes_fake",
    "nms_fake",
    "paste_masks_binary_fake",
    "paste_masks_fake",
    "register",
    "roi_align_backward_fake",
    "roi_align_fake",
]

_done = False
_lock = threading.Lock()


def nms_fake(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    size = torch.library.get_ctx().new_dynamic_size()
    return boxes.new_empty((size,), dtype=torch.int64)


def batched_nms_fake(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    return nms_fake(boxes, scores, iou_threshold)


def roi_align_fake(
    input: Tensor,
    rois: Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    return input.new_empty((rois.shape[0], input.shape[1], pooled_height, pooled_width))


def roi_align_backward_fake(
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
    return grad.new_empty((batch_size, channels, height, width))


def paste_masks_fake(masks: Tensor, boxes: Tensor, height: int, width: int, padding: int) -> Tensor:
    return masks.new_empty((masks.shape[0], height, width))


def paste_masks_binary_fake(
    masks: Tensor, boxes: Tensor, height: int, width: int, padding: int, threshold: float
) -> Tensor:
    return masks.new_empty((masks.shape[0], height, width), dtype=torch.bool)


def _mask_to_rle_fake(masks: Tensor) -> tuple[Tensor, Tensor]:
    # The strings always come back on the CPU.
    size = torch.library.get_ctx().new_dynamic_size()
    chars = torch.empty((size,), dtype=torch.uint8, device="cpu")
    return chars, torch.empty((masks.shape[0],), dtype=torch.int64, device="cpu")


def _crops_to_rle_fake(
    crops: list[Tensor], boxes: Tensor, height: int, width: int
) -> tuple[Tensor, Tensor]:
    size = torch.library.get_ctx().new_dynamic_size()
    chars = torch.empty((size,), dtype=torch.uint8, device="cpu")
    return chars, torch.empty((boxes.shape[0],), dtype=torch.int64, device="cpu")


def _box_overlap_pairs_fake(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    size = torch.library.get_ctx().new_dynamic_size()
    return (
        a.new_empty((size,), dtype=torch.int64),
        a.new_empty((size,), dtype=torch.int64),
        a.new_empty((size,), dtype=torch.float64),
    )


def decode_boxes_fake(
    deltas: Tensor,
    boxes: Tensor,
    wx: float,
    wy: float,
    ww: float,
    wh: float,
    clamp: float,
) -> Tensor:
    return deltas.new_empty((deltas.shape[0], deltas.shape[1] // 4, 4))


def _roi_align_setup(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    input, rois, scale, ph, pw, sampling_ratio, aligned = inputs
    ctx.save_for_backward(rois)
    ctx.input_shape = tuple(input.shape)
    ctx.params = (scale, ph, pw, sampling_ratio, aligned)


def _roi_align_backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
    (rois,) = ctx.saved_tensors
    scale, ph, pw, sampling_ratio, aligned = ctx.params
    b, c, h, w = ctx.input_shape
    grad_input = torch.ops.streamseg.roi_align_backward(
        grad, rois, scale, ph, pw, b, c, h, w, sampling_ratio, aligned
    )
    return grad_input, None, None, None, None, None, None


_FAKES: dict[str, Callable[..., Any]] = {
    "streamseg::nms": nms_fake,
    "streamseg::batched_nms": batched_nms_fake,
    "streamseg::roi_align": roi_align_fake,
    "streamseg::roi_align_backward": roi_align_backward_fake,
    "streamseg::paste_masks": paste_masks_fake,
    "streamseg::paste_masks_binary": paste_masks_binary_fake,
    "streamseg::mask_to_rle": _mask_to_rle_fake,
    "streamseg::crops_to_rle": _crops_to_rle_fake,
    "streamseg::box_overlap_pairs": _box_overlap_pairs_fake,
    "streamseg::decode_boxes": decode_boxes_fake,
}


def register() -> None:
    """Register the fakes and roi_align's autograd (idempotent)."""
    global _done
    with _lock:
        if _done:
            return
        for name, fn in _FAKES.items():
            torch.library.register_fake(name, fn)
        torch.library.register_autograd(
            "streamseg::roi_align", _roi_align_backward, setup_context=_roi_align_setup
        )
        _done = True
