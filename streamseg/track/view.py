"""What a tracker hands to the alert rules after each frame: ``TrackView``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from streamseg.types import MaskCrops, Regions

__all__ = ["FrameInfo", "TrackView"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class FrameInfo:
    """The frame a view belongs to: camera, capture time (s), stream time (s), size."""

    camera_id: str
    time: float
    frame_seq: int
    pts: float | None
    image_size: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class TrackView:
    """Confirmed tracks observed in one frame, as parallel numpy arrays of length ``K``.

    Only tracks matched to a detection in this frame appear (lost tracks are
    not observed); rules keep their own per-track state in between.

    Attributes:
        frame: the frame.
        ids: ``int64 (K,)`` track ids.
        det_index: ``int64 (K,)`` index of each track's detection in the
            frame's ``Instances``.
        boxes: ``float64 (K, 4)`` xyxy pixels, this frame's detection boxes.
        prev_boxes: ``float64 (K, 4)`` the track's previous observed box
            (possibly several frames ago); NaN rows for a track's first box.
        first_boxes: ``float64 (K, 4)`` the track's first observed box.
        first_seen: ``float64 (K,)`` capture time of that first box, seconds.
        labels: ``int64 (K,)`` smoothed class ids; ``scores``: smoothed scores.
        det_scores: ``float64 (K,)`` this frame's detection scores.
        masks: the frame's ``bool (N, H, W)`` masks or ``MaskCrops``
            (index with ``det_index``), or ``None``.
        removed_ids: ``int64 (R,)`` confirmed tracks dropped in this frame
            (lost too long), with their last ``removed_boxes (R, 4)``,
            ``removed_labels (R,)`` and ``removed_scores (R,)``.
        regions: the frame's class regions (semantic and panoptic models),
            else ``None``.
    """

    frame: FrameInfo
    ids: I64
    det_index: I64
    boxes: F64
    prev_boxes: F64
    first_boxes: F64
    first_seen: F64
    labels: I64
    scores: F64
    det_scores: F64
    masks: Tensor | MaskCrops | None = None
    removed_ids: I64 = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    removed_boxes: F64 = dataclasses.field(default_factory=lambda: np.zeros((0, 4)))
    removed_labels: I64 = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    removed_scores: F64 = dataclasses.field(default_factory=lambda: np.zeros(0))
    regions: Regions | None = None
    _memo: dict[Hashable, Any] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per view and ``key`` (rules share per-frame geometry)."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value

    def anchors(self, anchor: str, which: str = "boxes") -> F64:
        """``(K, 2)`` anchor points of ``boxes`` (or ``prev_boxes`` / ``first_boxes``)."""
        from streamseg.geometry import anchor_points

        out: F64 = self.memo(
            ("anchors", anchor, which), lambda: anchor_points(getattr(self, which), anchor)
        )
        return out
