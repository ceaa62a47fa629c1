"""One interface for every tracker, chosen by a registry row.

A tracker follows one camera's instances over time: :meth:`InstanceTracker.update`
takes a frame's ``Instances`` and returns each detection's track id (``-1``:
none) with the view the alert rules read (``TrackerOutput``). The tracking
stage (``streamseg.track.stage``) holds one per camera and asks only this
interface, never a tracker's type (as detectron2's ``BaseTracker.update``
and its ``TRACKER_HEADS_REGISTRY``).

``TRACKERS`` is the only list: ``{kind: "module:class"}``, loaded when its
row is used (``streamseg.registry.load``); ``tracker_kind(tracking)`` picks
the row the ``tracking:`` section asks for:

* ``bytetrack``: :class:`~streamseg.track.tracker.ByteTracker`, the
  tracker of ``tracking.enabled: true``;
* ``given``: :class:`~streamseg.track.given.GivenIdTracker`, which keeps the
  ``track_ids`` the instances arrive with (``tracking.enabled: false``).

Example::

    >>> from streamseg.track.config import TrackingConfig
    >>> tracker = build_tracker(TrackingConfig(), num_classes=3)
    >>> type(tracker).__name__, len(tracker)
    ('ByteTrack', 0)
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from streamseg.registry import load
from streamseg.track.config import TrackingConfig
from streamseg.track.given import GivenIdTracker
from streamseg.track.state import CONFIRMED, LOST, TENTATIVE
from streamseg.track.tracker import ByteTracker, TrackerOutput
from streamseg.track.view import FrameInfo
from streamseg.types import Instances, Track, TrackState

__all__ = [
    "TRACKERS",
    "ByteTrack",
    "GivenIds",
    "InstanceTracker",
    "build_tracker",
    "tracker_kind",
]

TRACKERS: dict[str, str] = {
    "bytetrack": "streamseg.track.trackers:ByteTrack",
    "given": "streamseg.track.trackers:GivenIds",
}

_STATES = {TENTATIVE: TrackState.TENTATIVE, CONFIRMED: TrackState.CONFIRMED, LOST: TrackState.LOST}


class InstanceTracker(Protocol):
    """Every tracker, as the tracking stage uses it (one per camera)."""

    def __init__(self, *, settings: TrackingConfig, num_classes: int) -> None: ...

    def __len__(self) -> int:
        """Tracks kept now."""
        ...

    def update(self, frame: FrameInfo, instances: Instances) -> TrackerOutput:
        """One frame's instances (boxes ``xyxy`` in frame pixels): each detection's
        track id (``-1``: none) and the view the alert rules read. Never changes
        ``instances``."""
        ...

    def confirmed(self) -> int:
        """Tracks that the last ``update`` confirmed (``streamseg.track.started``)."""
        ...

    def state_counts(self) -> dict[str, int]:
        """``{state: tracks}`` for the ``streamseg.track.tracks`` gauge."""
        ...

    def tracks(self, camera_id: str) -> list[Track]:
        """Snapshots of the live tracks (``[]`` where the tracker keeps none)."""
        ...


def tracker_kind(tracking: TrackingConfig) -> str:
    """The ``TRACKERS`` row the ``tracking:`` section asks for."""
    return "bytetrack" if tracking.enabled else "given"


def build_tracker(tracking: TrackingConfig, *, num_classes: int) -> InstanceTracker:
    """A new tracker for one camera, of the kind ``tracking`` asks for."""
    cls: type[InstanceTracker] = load(TRACKERS[tracker_kind(tracking)])
    return cls(settings=tracking, num_classes=num_classes)


class ByteTrack:
    """``bytetrack``: :class:`ByteTracker` (motion, masks, class votes) behind the
    one interface."""

    def __init__(self, *, settings: TrackingConfig, num_classes: int) -> None:
        self.settings = settings
        self.tracker = ByteTracker(settings=settings, num_classes=num_classes)

    def __len__(self) -> int:
        return len(self.tracker)

    def update(self, frame: FrameInfo, instances: Instances) -> TrackerOutput:
        boxes, scores, labels = _host_arrays(instances)
        return self.tracker.update(frame, boxes, scores, labels, instances.masks)

    def confirmed(self) -> int:
        t = self.tracker.table
        fresh = (t.hits == self.settings.confirm_hits) & (t.det >= 0) & (t.state == CONFIRMED)
        return int(np.count_nonzero(fresh))

    def state_counts(self) -> dict[str, int]:
        states = self.tracker.table.state
        return {str(name): int(np.count_nonzero(states == code)) for code, name in _STATES.items()}

    def tracks(self, camera_id: str) -> list[Track]:
        table, boxes = self.tracker.snapshot_rows()
        labels = table.labels()
        return [
            Track(
                track_id=int(table.ids[i]),
                camera_id=camera_id,
                state=_STATES[int(table.state[i])],
                box=torch.tensor(
                    table.last_box[i] if table.det[i] >= 0 else boxes[i], dtype=torch.float32
                ),
                label=int(labels[i]),
                score=float(table.score[i]),
                first_seen=float(table.first_seen[i]),
                last_seen=float(table.last_seen[i]),
                hits=int(table.hits[i]),
            )
            for i in range(len(table))
        ]


class GivenIds:
    """``given``: the ``track_ids`` the instances arrive with, kept as they are
    (:class:`GivenIdTracker` remembers what the rules need of each id)."""

    def __init__(self, *, settings: TrackingConfig, num_classes: int) -> None:
        self.tracker = GivenIdTracker(max_lost_seconds=settings.max_lost_seconds)

    def __len__(self) -> int:
        return len(self.tracker)

    def update(self, frame: FrameInfo, instances: Instances) -> TrackerOutput:
        boxes, scores, labels = _host_arrays(instances)
        ids = instances.track_ids
        given = None if ids is None else ids.cpu().numpy()
        return self.tracker.update(frame, boxes, scores, labels, given, instances.masks)

    def confirmed(self) -> int:
        return 0  # ids are given: none is confirmed here

    def state_counts(self) -> dict[str, int]:
        return {"confirmed": len(self.tracker)}

    def tracks(self, camera_id: str) -> list[Track]:
        return []


def _host_arrays(inst: Instances) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(boxes (N,4) float64, scores (N,) float64, labels (N,) int64)`` on the host."""
    return (
        _host(inst.boxes, np.float64),
        _host(inst.scores, np.float64),
        _host(inst.labels, np.int64),
    )


def _host(values: torch.Tensor, dtype: type[np.generic]) -> np.ndarray:
    """``values`` as a numpy array of ``dtype`` on the host.

    A CPU tensor is converted by numpy: a torch call on a tiny tensor lets
    other threads take the GIL (see ``docs/performance.md``).
    """
    if values.requires_grad:
        values = values.detach()
    if values.device.type != "cpu":
        values = values.cpu()
    return values.numpy().astype(dtype, copy=False)
