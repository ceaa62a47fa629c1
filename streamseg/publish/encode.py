"""The JSON messages streamseg writes to Redis (``streamseg/schemas/*.schema.json``).

Detections (one message per frame, stream ``<prefix>:detections:<camera>``)::

    {"schema_version": 1, "type": "detections", "camera": "gate", "seq": 42,
     "pts": 2.8, "capture_time": 1718000000.12, "camera_time": null,
     "published_time": 1718000000.31, "image": {"height": 360, "width": 640},
     "model": {"arch": "maskrcnn_small"}, "traceparent": "00-...-01",
     "instances": [{"track_id": 7, "label": 1, "label_name": "person",
                    "score": 0.93, "box": [x1, y1, x2, y2],
                    "mask": {"size": [360, 640], "counts": "..."}}]}

Boxes are ``xyxy`` frame pixels, times unix seconds (``pts``: stream
seconds), masks COCO compressed RLE (``null`` when the model has none).
Semantic and panoptic models (``model.task``) add the frame's class regions
(the stuff; every class in semantic mode), one per class present::

     "regions": [{"label": 6, "label_name": "road", "area": 18139,
                  "mask": {"size": [360, 640], "counts": "..."}}]

(``area`` in pixels); instance models' messages have no ``regions`` key.
Alerts (stream ``<prefix>:alerts``) are ``Event.to_dict()`` plus the
``traceparent`` of the frame that caused them.

Numbers are rounded by one rule for every message kind (``round_numbers``
and the ``*_DECIMALS`` below): pixels to 2 decimals, scores to 5, times to
6 (microseconds), other numbers of an alert's ``extra`` to 3.

``MessageEncoder`` turns what tracking produced into ``Message``s, encoded
once whatever the number of sinks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from torch import Tensor

from streamseg.publish.sink import Message
from streamseg.types import Event, FrameResult, MaskCrops

__all__ = [
    "DETECTIONS_SCHEMA_VERSION",
    "MessageEncoder",
    "alert_message",
    "detections_message",
    "dumps",
    "mask_json",
    "regions_json",
    "round_box",
    "round_numbers",
    "round_time",
]

DETECTIONS_SCHEMA_VERSION = 1

PIXEL_DECIMALS = 2  # boxes, frame pixels
SCORE_DECIMALS = 5  # scores, [0, 1]
TIME_DECIMALS = 6  # unix or stream seconds: microseconds
OTHER_DECIMALS = 3  # any other number of an alert's ``extra`` (seconds of dwell, ...)
_TIME_KEYS = frozenset({"time", "pts", "since", "capture_time", "camera_time", "published_time"})


def round_box(box: Sequence[float]) -> list[float]:
    """``[x1, y1, x2, y2]`` rounded to ``PIXEL_DECIMALS``."""
    return [round(float(v), PIXEL_DECIMALS) for v in box]


def round_time(value: float | None) -> float | None:
    """Seconds rounded to ``TIME_DECIMALS`` (``None`` stays ``None``)."""
    return None if value is None else round(float(value), TIME_DECIMALS)


def round_numbers(message: dict[str, Any]) -> dict[str, Any]:
    """An alert-like message with its numbers rounded by the one rule (a new dict)."""
    out = dict(message)
    for key, value in message.items():
        if value is None or isinstance(value, bool):
            continue
        if key == "box":
            out[key] = round_box(value)
        elif key == "score":
            out[key] = round(float(value), SCORE_DECIMALS)
        elif key in _TIME_KEYS and isinstance(value, int | float):
            out[key] = round_time(value)
        elif key == "extra" and isinstance(value, dict):
            out[key] = _round_extra(value)
    return out


def _round_extra(value: Any, key: str = "") -> Any:
    if isinstance(value, float):
        return round(value, TIME_DECIMALS if key in _TIME_KEYS else OTHER_DECIMALS)
    if isinstance(value, dict):
        return {k: _round_extra(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_round_extra(v, key) for v in value]
    return value


def detections_message(
    result: FrameResult,
    *,
    arch: str,
    class_names: Sequence[str],
    published_time: float,
    masks: Sequence[dict[str, Any] | None] | None = None,
    regions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The detections message of one frame (see the module docstring).

    ``masks`` / ``regions``: the instances' masks and the frame's regions
    already encoded (``mask_json``, ``regions_json``), else they are encoded
    here.
    """
    frame, inst = result.frame, result.instances
    if masks is None:
        masks = mask_json(result)
    if regions is None and inst.regions is not None:
        regions = regions_json(result, class_names)
    if not inst.boxes.is_cpu:
        inst = inst.to("cpu")
    n = len(inst)
    boxes = inst.boxes.tolist()
    scores = inst.scores.tolist()
    # One sum is finite only if every term is (boxes are far from overflowing);
    # cheaper than a tensor check per frame.
    if not math.isfinite(sum(scores) + sum(map(sum, boxes))):
        raise ValueError(f"frame {frame.camera_id}#{frame.seq}: NaN or infinite boxes or scores")
    labels = inst.labels.tolist()
    tracks = inst.track_ids.tolist() if inst.track_ids is not None else [None] * n
    instances = []
    for i in range(n):
        label = int(labels[i])
        track = tracks[i]
        instances.append(
            {
                "track_id": None if track is None or track < 0 else int(track),
                "label": label,
                "label_name": class_names[label] if 0 <= label < len(class_names) else None,
                "score": round(float(scores[i]), SCORE_DECIMALS),
                "box": round_box(boxes[i]),
                "mask": masks[i],
            }
        )
    height, width = inst.image_size
    _check_finite([frame.pts, frame.capture_time, frame.camera_time, published_time])
    message: dict[str, Any] = {
        "schema_version": DETECTIONS_SCHEMA_VERSION,
        "type": "detections",
        "camera": frame.camera_id,
        "seq": frame.seq,
        "pts": round_time(frame.pts),
        "capture_time": round_time(frame.capture_time),
        "camera_time": round_time(frame.camera_time),
        "published_time": round_time(published_time),
        "image": {"height": height, "width": width},
        "model": {"arch": arch},
        "traceparent": frame.trace.get("traceparent"),
        "instances": instances,
    }
    if regions is not None:
        message["regions"] = regions
    return message


def mask_json(result: FrameResult) -> list[dict[str, Any] | None]:
    """The COCO RLE of each instance's mask as JSON values (``None`` without masks)."""
    inst = result.instances
    n = len(inst)
    if inst.masks is None or not n:
        return [None] * n
    return [_rle_json(r) for r in _rles(inst.masks)]


def regions_json(result: FrameResult, class_names: Sequence[str]) -> list[dict[str, Any]] | None:
    """The frame's regions as message entries (``None`` when the model gives none)."""
    regions = result.instances.regions
    if regions is None:
        return None
    from streamseg.ops.label_rle import label_map_rle

    rles = label_map_rle(regions.label_map, regions.labels)
    return [
        {
            "label": label,
            "label_name": class_names[label] if 0 <= label < len(class_names) else None,
            "area": area,
            "mask": rle,
        }
        for label, area, rle in zip(
            regions.labels.tolist(), regions.areas.tolist(), rles, strict=True
        )
    ]


def alert_message(event: Event, *, traceparent: str | None = None) -> dict[str, Any]:
    """The alert message of one event: ``Event.to_dict()`` plus ``traceparent``, the
    trace context of the frame that caused it (``None`` when tracing is off)."""
    message = round_numbers(event.to_dict())
    message["traceparent"] = traceparent
    _check_finite(message)
    return message


def dumps(message: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON, by orjson.

    The same JSON values as ``json.dumps(message, separators=(",", ":"),
    allow_nan=False)``; only the spelling may differ (non-ASCII characters
    as UTF-8 rather than ``\\u`` escapes, ``1e-5`` for ``1e-05``). NaN and
    infinities are not JSON: the message builders above refuse them
    (``ValueError``), since orjson would write ``null``.
    """
    return orjson.dumps(message)


def _check_finite(value: Any) -> None:
    """``ValueError`` when ``value`` holds a NaN or an infinity (what JSON cannot say)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not JSON")
    elif isinstance(value, dict):
        for v in value.values():
            _check_finite(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_finite(v)


class MessageEncoder:
    """Each frame's detections and each alert event as a ``Message`` (JSON bytes).

    Args:
        arch / class_names: the model, named in every detections message.
        stamp: ``camera -> {"worker": name, "epoch": n}`` (or ``None``) for a fleet
            worker (``streamseg.fleet``): added to every detections and alert
            message of that camera, so a consumer sees a handover.

    ``mask_seconds`` counts the CPU time (of the calling thread) spent
    encoding masks (all of a call's frames first, one clock read around
    them), the rest of ``encode`` being JSON.
    """

    def __init__(
        self,
        *,
        arch: str,
        class_names: Sequence[str],
        stamp: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self._arch = arch
        self._stamp = stamp
        self._class_names = tuple(class_names)
        self.mask_seconds = 0.0

    def encode(self, items: Sequence[tuple[FrameResult, Sequence[Event]]]) -> list[Message]:
        """Messages for ``items``, in order (a frame's alerts follow its detections)."""
        out: list[Message] = []
        t0 = time.thread_time()
        encoded = [mask_json(result) for result, _events in items]
        regions = [regions_json(result, self._class_names) for result, _events in items]
        self.mask_seconds += time.thread_time() - t0
        for (result, events), masks, frame_regions in zip(items, encoded, regions, strict=True):
            frame, now = result.frame, time.time()
            msg = detections_message(
                result,
                arch=self._arch,
                class_names=self._class_names,
                published_time=now,
                masks=masks,
                regions=frame_regions,
            )
            origin = self._stamp(frame.camera_id) if self._stamp is not None else None
            if origin:
                msg.update(origin)
            out.append(Message("detections", frame.camera_id, dumps(msg), frame, now))
            trace = frame.trace.get("traceparent")
            for event in events:
                alert = alert_message(event, traceparent=trace)
                if origin:
                    alert.update(origin)
                body = dumps(alert)
                out.append(Message("alert", event.camera_id, body, published_time=now))
        return out


def _rles(masks: Tensor | MaskCrops) -> list[dict[str, Any]]:
    """COCO RLEs of either mask form: crops are encoded without a frame-size mask."""
    from streamseg import ops

    if isinstance(masks, MaskCrops):
        return ops.crops_to_rle(masks.crops, masks.boxes, masks.image_size)
    return ops.masks_to_rle(masks)


def _rle_json(rle: Any) -> dict[str, Any]:
    counts = rle["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii")
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": counts}
