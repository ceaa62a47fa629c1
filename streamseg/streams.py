"""The published-stream contract: every Redis stream and MQTT topic name, and their parsing.

This module is the only place that spells them (``tests/test_streams.py``
greps the package for the literals). Writers (the Redis and MQTT sinks, the
hot-swap controller) and readers (``streamseg.client``, ``subscribe``,
``replay``, ``render``, ``swap``) all build names here. The messages
themselves are described by the JSON Schemas in ``streamseg/schemas``
(docs/events.md).

Redis streams (``prefix``: the ``redis.stream_prefix``, ``streamseg`` by default)::

    <prefix>:detections:<camera>    one detections message per frame of a camera
    <prefix>:alerts                 every alert, of every camera
    <prefix>:control                hot-swap requests
    <prefix>:control:status         hot-swap answers

MQTT topics (``prefix``: a sink's ``topic_prefix``)::

    <prefix>/<camera>/detections    the detections messages of a camera
    <prefix>/alerts                 every alert
    <prefix>/available              retained: online / offline (last will)
    <prefix>/<camera>/state         retained: what the camera sees, its health
    <prefix>/<camera>/snapshot      alert snapshots (JPEG)

A recorded detections message (a JSON line that ``subscribe`` printed, or
a stream entry's ``data``) is checked by :func:`recorded_detections`; a
recording that cannot be read raises :class:`RecordingError`.

Example:
    >>> detections_stream("streamseg", "gate")
    'streamseg:detections:gate'
    >>> camera_of_stream("streamseg", "streamseg:detections:gate")
    'gate'
    >>> mqtt_topic("site1", "detections", "gate")
    'site1/gate/detections'
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DETECTIONS_FIELDS",
    "RecordingError",
    "alerts_stream",
    "availability_topic",
    "camera_of_stream",
    "control_status_stream",
    "control_stream",
    "detections_pattern",
    "detections_stream",
    "mqtt_topic",
    "recorded_detections",
    "state_topic",
]

# Message kinds (``streamseg.publish.sink.Message.kind``) and the words of the names.
DETECTIONS = "detections"
ALERTS = "alerts"
_CONTROL = "control"
_STATUS = "status"
_AVAILABLE = "available"
_STATE = "state"

# What a detections message must hold to be replayed or drawn (docs/events.md).
DETECTIONS_FIELDS = ("camera", "seq", "capture_time", "image", "instances")


class RecordingError(ValueError):
    """A recording that cannot be read: the message names where and what."""


# -- Redis streams ---------------------------------------------------------------------------


def detections_stream(prefix: str, camera: str) -> str:
    """The Redis stream of ``camera``'s detections messages."""
    return f"{prefix}:{DETECTIONS}:{camera}"


def detections_pattern(prefix: str) -> str:
    """The ``SCAN MATCH`` pattern of every camera's detections stream."""
    return detections_stream(prefix, "*")


def alerts_stream(prefix: str) -> str:
    """The Redis stream of every alert."""
    return f"{prefix}:{ALERTS}"


def control_stream(prefix: str) -> str:
    """The Redis stream of hot-swap requests (``streamseg swap`` -> services)."""
    return f"{prefix}:{_CONTROL}"


def control_status_stream(prefix: str) -> str:
    """The Redis stream of hot-swap answers (services -> ``streamseg swap``)."""
    return f"{control_stream(prefix)}:{_STATUS}"


def camera_of_stream(prefix: str, stream: str | bytes) -> str | None:
    """The camera of a detections stream name (as Redis returns it, ``bytes`` or ``str``),
    ``None`` when ``stream`` is not one under ``prefix``."""
    name = stream.decode() if isinstance(stream, bytes) else str(stream)
    head = detections_stream(prefix, "")
    if not name.startswith(head) or len(name) == len(head):
        return None
    return name[len(head) :]


# -- MQTT topics -----------------------------------------------------------------------------


def mqtt_topic(prefix: str, kind: str, camera: str) -> str:
    """The topic of a message of ``kind`` (``detections``, ``alert``, ``snapshot``) about
    ``camera``: alerts share one topic, the others have one per camera."""
    if kind == "alert":
        return f"{prefix}/{ALERTS}"
    return f"{prefix}/{camera}/{kind}"


def availability_topic(prefix: str) -> str:
    """The retained ``online`` / ``offline`` topic of an MQTT sink."""
    return f"{prefix}/{_AVAILABLE}"


def state_topic(prefix: str, camera: str) -> str:
    """The retained state topic of ``camera`` (objects by class, health)."""
    return f"{prefix}/{camera}/{_STATE}"


# -- recorded messages -----------------------------------------------------------------------


def recorded_detections(obj: Any, where: str) -> dict[str, Any] | None:
    """The detections message in ``obj`` (one parsed JSON line or stream entry), or ``None``
    for a message of another ``type`` (an alert).

    An ``{"stream", "id", "message"}`` envelope (``subscribe --envelope``)
    is unwrapped. ``RecordingError`` (naming ``where``) when ``obj`` is not
    an object or lacks one of :data:`DETECTIONS_FIELDS`.
    """
    if isinstance(obj, dict) and "message" in obj and "stream" in obj:
        obj = obj["message"]
    if not isinstance(obj, dict):
        raise RecordingError(f"{where}: expected a JSON object (a detections message)")
    if obj.get("type") not in (None, DETECTIONS):
        return None
    missing = [k for k in DETECTIONS_FIELDS if k not in obj]
    if missing:
        raise RecordingError(
            f"{where}: not a detections message: missing {', '.join(repr(m) for m in missing)} "
            "(see docs/events.md)"
        )
    return obj
