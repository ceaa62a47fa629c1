"""Box ops: NMS (plain and per category), box coding, clipping, IoU and overlap pairs."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from streamseg.ops import _native
from streamseg.ops import reference as _ref
from streamseg.ops._checks import _check, _check_boxes, _check_scores
from streamseg.ops._serve import kernels_for

BOX_CLAMP = math.log(1000.0 / 16)


Weights = tuple[float, float, float, float]


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Greedy non-maximum suppression.

    Args:
        boxes: ``(N, 4)`` float xyxy pixels.
        scores: ``(N,)`` float.
        iou_threshold: a box is dropped when its IoU with a kept,
            higher-scored box is ``> iou_threshold``.

    Returns:
        ``(K,)`` int64 indices of the kept boxes by decreasing score (equal
        scores keep input order).
    """
    _check_scores(boxes, scores)
    kernels = kernels_for(boxes) if boxes.dtype == scores.dtype else None
    if kernels is not None:
        return kernels.nms(boxes, scores, float(iou_threshold))
    return _ref.nms(boxes, scores, float(iou_threshold))


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """NMS independently within each category.

    Args:
        boxes: ``(N, 4)`` float xyxy pixels.
        scores: ``(N,)`` float.
        idxs: ``(N,)`` int64 category (or image) of each box; boxes of
            different ``idxs`` never suppress each other.
        iou_threshold: as in :func:`nms`.

    Returns:
        ``(K,)`` int64 indices of the kept boxes by decreasing score.
    """
    _check_scores(boxes, scores)
    _check(idxs.shape == scores.shape, f"idxs must be (N,), got shape {tuple(idxs.shape)}")
    kernels = kernels_for(boxes) if boxes.dtype == scores.dtype else None
    if kernels is not None and idxs.device == boxes.device:
        return kernels.batched_nms(boxes, scores, idxs, float(iou_threshold))
    return _ref.batched_nms(boxes, scores, idxs, float(iou_threshold))


def encode_boxes(reference: Tensor, proposals: Tensor, weights: Weights) -> Tensor:
    """Regression targets ``(N, 4)`` that take ``proposals (N, 4)`` to ``reference (N, 4)``.

    torchvision's ``BoxCoder.encode``; ``weights = (wx, wy, ww, wh)``.
    """
    _check_boxes(reference, "reference")
    _check_boxes(proposals, "proposals")
    return _ref.encode_boxes(reference, proposals, weights)


def decode_boxes(
    deltas: Tensor, boxes: Tensor, weights: Weights, clamp: float = BOX_CLAMP
) -> Tensor:
    """Apply regression ``deltas (N, 4k)`` to ``boxes (N, 4)`` xyxy -> ``(N, k, 4)`` xyxy.

    torchvision's ``BoxCoder.decode``: ``dw``, ``dh`` clamped at ``clamp``.
    """
    _check_boxes(boxes)
    _check(
        deltas.dim() == 2 and deltas.shape[0] == boxes.shape[0] and deltas.shape[1] % 4 == 0,
        f"deltas must be (N, 4k) with N = {boxes.shape[0]}, got shape {tuple(deltas.shape)}",
    )
    kernels = kernels_for(deltas)
    if kernels is not None and boxes.device == deltas.device:
        wx, wy, ww, wh = (float(w) for w in weights)
        return kernels.decode_boxes(deltas, boxes, wx, wy, ww, wh, float(clamp))
    return _ref.decode_boxes(deltas, boxes, weights, float(clamp))


def clip_boxes(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    """Clamp ``(..., 4)`` xyxy boxes into an image of ``size = (h, w)`` pixels."""
    _check(boxes.shape[-1] == 4, f"boxes must be (..., 4), got shape {tuple(boxes.shape)}")
    return _ref.clip_boxes(boxes, size)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    """Indices (int64) of ``(N, 4)`` boxes with width and height ``>= min_size`` pixels."""
    _check_boxes(boxes)
    return _ref.remove_small_boxes(boxes, min_size)


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    """Pairwise IoU ``(N, M)`` of ``a (N, 4)`` and ``b (M, 4)`` xyxy boxes."""
    _check_boxes(a, "a")
    _check_boxes(b, "b")
    return _ref.box_iou(a, b)


def box_overlap_pairs(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The overlapping pairs of ``a (N, 4)`` and ``b (M, 4)`` float64 xyxy boxes, with their IoU.

    Returns ``rows (P,)`` into ``a``, ``cols (P,)`` into ``b`` (int64, by row
    then column) and ``iou (P,)`` float64: the pairs whose intersection has
    positive width and height, IoU ``inter / max(union, 1e-12)``. On the CPU
    one C++ call sweeps ``b`` by left edge (cost follows the nearby pairs);
    elsewhere every pair is tested with torch.
    """
    _check(
        a.dim() == 2 and a.shape[1] == 4 and b.dim() == 2 and b.shape[1] == 4,
        f"boxes must be (N, 4) and (M, 4), got {tuple(a.shape)} and {tuple(b.shape)}",
    )
    _check(
        a.dtype == torch.float64 and b.dtype == torch.float64,
        f"boxes must be float64, got {a.dtype} and {b.dtype}",
    )
    if a.is_cpu and b.is_cpu and _native.enabled("cpu"):
        rows, cols, iou = torch.ops.streamseg.box_overlap_pairs(a, b)
        return rows, cols, iou
    return _ref.box_overlap_pairs(a, b)
