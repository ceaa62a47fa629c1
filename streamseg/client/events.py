"""The typed events a client reads: ``FrameDetections`` (with ``Instance``s) and ``Alert``.

Each is built from one stream entry's JSON (docs/events.md). Masks stay as
the COCO RLE they arrived in until ``mask()`` decodes one to a numpy array,
so reading events costs no pixel work unless you ask for it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Alert",
    "ClientError",
    "Entry",
    "FrameDetections",
    "Instance",
    "MessageError",
    "Region",
    "decode_rle",
]

Box = tuple[float, float, float, float]

# The ``schema_version`` of the alert messages this client reads and writes.
ALERT_SCHEMA_VERSION = 1


class ClientError(Exception):
    """The client cannot go on (Redis away for longer than allowed, a missing extra)."""


class MessageError(ClientError):
    """A stream entry is not the message its stream should hold (the text says which and why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry as read: ``stream`` name, entry ``id`` and the raw ``data`` field."""

    stream: str
    id: str
    data: bytes | None

    def message(self) -> dict[str, Any]:
        """The entry's JSON object; ``MessageError`` when it has none."""
        if self.data is None:
            raise MessageError(f"{self.stream} {self.id}: the entry has no 'data' field")
        try:
            value = json.loads(self.data)
        except ValueError as exc:
            raise MessageError(f"{self.stream} {self.id}: 'data' is not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise MessageError(f"{self.stream} {self.id}: 'data' is not a JSON object")
        return value


def decode_rle(rle: Mapping[str, Any]) -> np.ndarray:
    """COCO RLE (compressed string or list of counts) -> ``(H, W)`` bool numpy array."""
    import numpy as np

    from streamseg.ops.rle import string_to_counts

    h, w = (int(v) for v in rle["size"])
    raw = rle["counts"]
    counts = [int(c) for c in raw] if isinstance(raw, list) else string_to_counts(raw)
    if sum(counts) != h * w or any(c < 0 for c in counts):
        raise ValueError(f"RLE counts sum to {sum(counts)} but size {h}x{w} needs {h * w} pixels")
    values = np.arange(len(counts)) % 2 == 1
    flat = np.repeat(values, counts)
    return np.ascontiguousarray(flat.reshape(w, h).T)  # COCO runs go down the columns


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """One detected object of a frame.

    Attributes:
        box: ``(x1, y1, x2, y2)`` frame pixels.
        score: confidence in ``[0, 1]``.
        label: class id; ``label_name`` its name (``None`` when unknown).
        track_id: the track following the object, ``None`` when untracked.
        rle: the mask as COCO compressed RLE ``{"size": [H, W], "counts": str}``,
            ``None`` when the model has no masks.
    """

    box: Box
    score: float
    label: int
    label_name: str | None = None
    track_id: int | None = None
    rle: Mapping[str, Any] | None = None

    def mask(self) -> np.ndarray | None:
        """The mask as a ``(H, W)`` bool array at frame resolution (decoded now), or ``None``."""
        return None if self.rle is None else decode_rle(self.rle)

    def to_dict(self) -> dict[str, Any]:
        """The instance as it is written in a detections message."""
        return {
            "track_id": self.track_id,
            "label": self.label,
            "label_name": self.label_name,
            "score": self.score,
            "box": list(self.box),
            "mask": None if self.rle is None else dict(self.rle),
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    """The pixels of one class in a frame (a semantic or panoptic model's "stuff").

    Attributes:
        label: class id; ``label_name`` its name (``None`` when unknown).
        area: pixels.
        rle: the region as COCO compressed RLE ``{"size": [H, W], "counts": str}``.
    """

    label: int
    area: int
    rle: Mapping[str, Any]
    label_name: str | None = None

    def mask(self) -> np.ndarray:
        """The region as a ``(H, W)`` bool array at frame resolution (decoded now)."""
        return decode_rle(self.rle)

    def to_dict(self) -> dict[str, Any]:
        """The region as it is written in a detections message."""
        return {
            "label": self.label,
            "label_name": self.label_name,
            "area": self.area,
            "mask": dict(self.rle),
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FrameDetections:
    """What one frame of one camera held (a detections message).

    Attributes:
        camera: camera id; ``seq`` the frame's sequence number for that camera.
        pts: stream time, seconds, or ``None``.
        capture_time / camera_time / published_time: unix seconds (``camera_time``:
            the camera's own clock when known, else ``None``).
        height / width: frame size, pixels.
        arch: the model that produced it.
        instances: the objects found, in the order of the message.
        regions: the class regions of semantic and panoptic models (empty
            for instance models), one per class present.
        traceparent: W3C trace context of the frame's trace, or ``None``.
        worker / epoch: in a fleet, the worker that published it and its lease's
            epoch for the camera (a new epoch is a handover); ``None`` without one.
        stream / id: where the message was read (Redis stream and entry id).
    """

    camera: str
    seq: int
    pts: float | None
    capture_time: float
    camera_time: float | None
    published_time: float
    height: int
    width: int
    arch: str
    instances: tuple[Instance, ...]
    regions: tuple[Region, ...] = ()
    traceparent: str | None = None
    worker: str | None = None
    epoch: int | None = None
    stream: str = ""
    id: str = ""

    def __len__(self) -> int:
        return len(self.instances)

    def region(self, name: str) -> Region | None:
        """The region of the class named ``name``, or ``None`` when the frame has none."""
        return next((r for r in self.regions if r.label_name == name), None)

    def label_map(self) -> np.ndarray:
        """``(H, W)`` int32: each pixel's region class, 0 where no region is (things, in
        panoptic mode)."""
        import numpy as np

        out = np.zeros((self.height, self.width), dtype=np.int32)
        for r in self.regions:
            out[r.mask()] = r.label
        return out

    def masks(self) -> np.ndarray:
        """All masks as one ``(N, H, W)`` bool array (empty masks where an instance has none)."""
        import numpy as np

        out = np.zeros((len(self.instances), self.height, self.width), dtype=bool)
        for i, inst in enumerate(self.instances):
            mask = inst.mask()
            if mask is not None:
                out[i] = mask
        return out

    @classmethod
    def from_message(
        cls, msg: Mapping[str, Any], *, stream: str = "", id: str = ""
    ) -> FrameDetections:
        """Parse a detections message; ``MessageError`` names what is wrong."""
        try:
            if msg.get("type") != "detections":
                raise ValueError(f"type is {msg.get('type')!r}, not 'detections'")
            image = msg["image"]
            return cls(
                camera=str(msg["camera"]),
                seq=int(msg["seq"]),
                pts=_opt_float(msg["pts"]),
                capture_time=float(msg["capture_time"]),
                camera_time=_opt_float(msg["camera_time"]),
                published_time=float(msg["published_time"]),
                height=int(image["height"]),
                width=int(image["width"]),
                arch=str(msg["model"]["arch"]),
                instances=tuple(_instance(d) for d in msg["instances"]),
                regions=tuple(_region(d) for d in msg.get("regions") or ()),
                **_envelope(msg, stream, id),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad(stream, id, "detections", exc) from None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """One alert (an alert message; ``streamseg.types.Event`` on the service's side).

    Its fields are the message's (``alert.schema.json``) and ``Event``'s,
    by the same names, plus where it was read (``stream``, ``id``);
    ``tests/client/test_client_alert_schema.py`` holds them together.

    Attributes:
        rule: the rule's name in pipeline.yaml; ``kind`` what happened: one of
            ``streamseg.track.alerts.ALERT_KINDS`` (``enter``, ``exit``,
            ``line_in``, ``line_out``, ``dwell``, ``crowding``, ``crowding_end``,
            ``on_region``, ``off_region``, ``coverage``, ``coverage_end``; the
            table in docs/events.md), or recording's own ``disk_full`` (rule
            ``record``: a full disk stopped recording).
        camera_id: camera id (``camera`` is the same, as in ``FrameDetections``);
            ``frame_seq`` the frame.
        time: capture wall time of that frame, unix seconds; ``pts`` its stream time.
        track_id / label / label_name / box / score: the object, when one caused it.
        zone / line: what the rule watches (one of them).
        count: occupancy (crowding) or running crossing count (lines), else ``None``.
        extra: rule-specific details (e.g. ``dwell_seconds``).
        mask_rle: the object's mask as COCO RLE, or ``None`` (``rle`` is the same,
            as in ``Instance``).
        snapshot: path of the snapshot file the service's console writes
            (on the service's machine, a moment after the alert), or ``None``.
        traceparent / stream / id: as in ``FrameDetections``.
        worker / epoch: in a fleet, the worker that published it and its lease's
            epoch for the camera (a new epoch is a handover); ``None`` without one.
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
    box: Box | None = None
    score: float | None = None
    mask_rle: Mapping[str, Any] | None = None
    count: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    snapshot: str | None = None
    traceparent: str | None = None
    worker: str | None = None
    epoch: int | None = None
    stream: str = ""
    id: str = ""

    @property
    def camera(self) -> str:
        """``camera_id`` (the name ``FrameDetections`` uses, so both kinds read alike)."""
        return self.camera_id

    @property
    def rle(self) -> Mapping[str, Any] | None:
        """``mask_rle`` (the name ``Instance`` uses)."""
        return self.mask_rle

    def mask(self) -> np.ndarray | None:
        """The object's mask as a ``(H, W)`` bool array (decoded now), or ``None``."""
        return None if self.mask_rle is None else decode_rle(self.mask_rle)

    def to_dict(self) -> dict[str, Any]:
        """The alert as it is written in an alert message (``alert.schema.json``)."""
        out: dict[str, Any] = {"schema_version": ALERT_SCHEMA_VERSION, "type": "alert"}
        for field in dataclasses.fields(self):
            if field.name not in ("stream", "id"):
                out[field.name] = getattr(self, field.name)
        for name in ("worker", "epoch"):  # written only by a fleet's workers
            if out[name] is None:
                del out[name]
        out["box"] = None if self.box is None else list(self.box)
        out["mask_rle"] = None if self.mask_rle is None else dict(self.mask_rle)
        out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_message(cls, msg: Mapping[str, Any], *, stream: str = "", id: str = "") -> Alert:
        """Parse an alert message; ``MessageError`` names what is wrong."""
        try:
            if msg.get("type") != "alert":
                raise ValueError(f"type is {msg.get('type')!r}, not 'alert'")
            return cls(
                rule=str(msg["rule"]),
                kind=str(msg["kind"]),
                camera_id=str(msg["camera_id"]),
                time=float(msg["time"]),
                frame_seq=int(msg["frame_seq"]),
                track_id=_opt_int(msg.get("track_id")),
                label=_opt_int(msg.get("label")),
                label_name=msg.get("label_name"),
                zone=msg.get("zone"),
                line=msg.get("line"),
                pts=_opt_float(msg.get("pts")),
                box=None if msg.get("box") is None else _box(msg["box"]),
                score=_opt_float(msg.get("score")),
                mask_rle=msg.get("mask_rle"),
                count=_opt_int(msg.get("count")),
                extra=dict(msg.get("extra") or {}),
                snapshot=msg.get("snapshot"),
                **_envelope(msg, stream, id),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad(stream, id, "alert", exc) from None


def _envelope(msg: Mapping[str, Any], stream: str, id: str) -> dict[str, Any]:
    """The fields every message type has: its trace, its fleet stamp and where it was read."""
    return {
        "traceparent": msg.get("traceparent"),
        "worker": msg.get("worker"),
        "epoch": _opt_int(msg.get("epoch")),
        "stream": stream,
        "id": id,
    }


def _instance(d: Mapping[str, Any]) -> Instance:
    return Instance(
        box=_box(d["box"]),
        score=float(d["score"]),
        label=int(d["label"]),
        label_name=d.get("label_name"),
        track_id=_opt_int(d.get("track_id")),
        rle=d.get("mask"),
    )


def _region(d: Mapping[str, Any]) -> Region:
    return Region(
        label=int(d["label"]),
        area=int(d["area"]),
        rle=d["mask"],
        label_name=d.get("label_name"),
    )


def _box(v: Sequence[Any]) -> Box:
    if len(v) != 4:
        raise ValueError(f"a box has 4 numbers, got {len(v)}")
    return (float(v[0]), float(v[1]), float(v[2]), float(v[3]))


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _bad(stream: str, id: str, kind: str, exc: BaseException) -> MessageError:
    what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
    where = f"{stream} {id}: " if stream else ""
    return MessageError(
        f"{where}not a valid {kind} message: {what} "
        f"(Client(validate=True) checks each message against {kind}.schema.json)"
    )
