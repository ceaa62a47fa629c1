"""Argument checks of the public ops: a ``ValueError`` that names the argument and its shape."""

from __future__ import annotations

from torch import Tensor

__all__ = ["_check", "_check_boxes", "_check_paste", "_check_scores"]


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


def _check_boxes(boxes: Tensor, name: str = "boxes", width: int = 4) -> None:
    _check(
        boxes.dim() == 2 and boxes.shape[1] == width,
        f"{name} must be a (N, {width}) tensor, got shape {tuple(boxes.shape)}",
    )
    _check(boxes.is_floating_point(), f"{name} must be floating point, got {boxes.dtype}")


def _check_scores(boxes: Tensor, scores: Tensor) -> None:
    _check_boxes(boxes)
    _check(
        scores.shape == boxes.shape[:1],
        f"scores must be (N,) with N = {boxes.shape[0]} boxes, got shape {tuple(scores.shape)}",
    )
    _check(scores.device == boxes.device, "boxes and scores must be on the same device")


def _check_paste(masks: Tensor, boxes: Tensor, image_size: tuple[int, int]) -> tuple[int, int]:
    """Check the arguments of a mask paste; the frame's ``(h, w)``."""
    _check(
        masks.dim() == 3 and masks.shape[1] == masks.shape[2],
        f"masks must be (N, M, M), got shape {tuple(masks.shape)}",
    )
    _check_boxes(boxes)
    _check(masks.shape[0] == boxes.shape[0], "masks and boxes must have the same length")
    return int(image_size[0]), int(image_size[1])
