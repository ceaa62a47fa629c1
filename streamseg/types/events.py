"""Tracks followed over time, and the alert events rules raise."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from torch import Tensor


class TrackState(enum.StrEnum):
    """Life cycle of a track."""

    TENTATIVE = "tentative"
    CONFIRMED = "confirmed"
    LOST = "lost"
    REMOVED = "removed"


@dataclasses.dataclass(frozen=True)
class Track:
    """A snapshot of one tracked object after an update.

    Attributes:
        track_id: id unique within its camera for the life of the process.
        camera_id: the camera.
        state: life-cycle state.
        box: ``(4,)`` float32 ``xyxy`` frame pixels (the last matched box, or
            the motion model's prediction while lost).
        label: smoothed class id.
        score: smoothed confidence.
        first_seen / last_seen: frame ``capture_time`` (seconds) of the first
            and latest matched detection.
        hits: number of frames in which the track was matched.
        mask: the last matched ``bool (H, W)`` mask, or ``None``.
    """

    track_id: int
    camera_id: str
    state: TrackState
    box: Tensor
    label: int
    score: float
    first_seen: float
    last_seen: float
    hits: int = 1
    mask: Tensor | None = None


EVENT_SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Event:
    """One alert produced by a rule.

    Attributes:
        rule: the rule's name from ``pipeline.yaml``.
        kind: what happened: one of ``streamseg.track.alerts.ALERT_KINDS``
            (the rules' registry; docs/events.md lists them).
        camera_id: the camera.
        track_id: the track that caused it (``None`` for crowding).
        label: class id, and ``label_name`` its name.
        zone / line: the zone or line name the rule watches (one of them).
        time: capture wall time (unix seconds) of the frame that triggered it.
        pts: stream time of that frame, seconds, or ``None``.
        frame_seq: the frame's sequence number.
        box: ``[x1, y1, x2, y2]`` frame pixels, or ``None``.
        score: detection confidence, or ``None``.
        mask_rle: COCO RLE ``{"size": [H, W], "counts": str}``, or ``None``.
        count: for crowding the occupancy, for lines the running count of
            the crossing direction; else ``None``.
        extra: rule-specific details (e.g. ``dwell_seconds``).
        snapshot: the path of the snapshot file the console writes for this
            event (shortly after it is published), or ``None`` when the
            console keeps no snapshot of it.
    """

    rule: str
    kind: str
    camera_id: str
    time: float
    frame_seq: int
    track_id: int | None = None
    label: int | None = None
    label_name: str | None = None
    zone: str | None = None
    line: str | None = None
    pts: float | None = None
    box: tuple[float, float, float, float] | None = None
    score: float | None = None
    mask_rle: Mapping[str, Any] | None = None
    count: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    snapshot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready message body (see ``schemas/alert.schema.json``)."""
        out: dict[str, Any] = {"schema_version": EVENT_SCHEMA_VERSION, "type": "alert"}
        out.update(dataclasses.asdict(self))
        if out["box"] is not None:
            out["box"] = [float(v) for v in out["box"]]
        out["mask_rle"] = None if self.mask_rle is None else dict(self.mask_rle)
        out["extra"] = dict(self.extra)
        return out
