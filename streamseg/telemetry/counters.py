"""The counters ``serve`` reports: one meaning per word, the same word everywhere.

This module is their one owner. The status line, the exit summary,
``/readyz`` (and the console, which shows it) and the metrics take the
words, the meanings and the metric names from here, so that ``skipped``
never means ``lost`` anywhere.

Frames, per camera (:data:`FRAME_COUNTERS`), in the order they happen::

    read = skipped + segmented + lost by the model + (still in the pipeline)
    segmented = published + lost by a sink + (still in the pipeline)

Messages, per sink (:data:`MESSAGE_COUNTERS`): each message goes to every
sink, and each sink reports it once, published or lost.

Skipping is the live-camera policy doing its job (a live camera never
builds a backlog: when the model is behind, the oldest waiting frame gives
way to the newest); losing is a failure: a frame or message that was
accepted and did not arrive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "FRAME_COUNTERS",
    "LOST_REASONS",
    "MESSAGE_COUNTERS",
    "SKIP_REASONS",
    "camera_summary",
    "frame_metric",
    "message_metric",
    "sink_counts",
    "sink_summary",
    "status_counts",
]

FRAME_COUNTERS: dict[str, str] = {
    "read": "frames read from the camera",
    "skipped": "frames the live-camera policy skipped, never segmented: the camera's queue "
    "was full and its oldest frame gave way to the newest (reason queue_full), or the "
    "service was stopping (reason stopping)",
    "segmented": "frames the model segmented",
    "published": "frames whose detections every sink acknowledged",
    "lost": "frames accepted for segmentation whose detections never reached every sink: "
    "the model failed their batch (reason segment_error) or a sink gave up their message "
    "(reason: the sink's name)",
}

MESSAGE_COUNTERS: dict[str, str] = {
    "published": "messages the sink delivered (detections and alerts)",
    "lost": "messages the sink gave up: its buffer overflowed while it was away, the "
    "destination rejected them, or they were still buffered when the service stopped",
    "buffered": "messages waiting for the sink now",
}

SKIP_REASONS = ("queue_full", "stopping")
LOST_REASONS = ("segment_error",)  # and the name of each sink


def frame_metric(word: str) -> str:
    """The OpenTelemetry counter of frame counter ``word`` (``streamseg.frames.<word>``);
    in Prometheus ``streamseg_frames_<word>_total``."""
    assert word in FRAME_COUNTERS, word
    return f"streamseg.frames.{word}"


def message_metric(word: str) -> str:
    """The OpenTelemetry instrument of message counter ``word`` (``streamseg.messages.<word>``)."""
    assert word in MESSAGE_COUNTERS, word
    return f"streamseg.messages.{word}"


def camera_summary(counts: Mapping[str, int]) -> str:
    """``287 read, 95 skipped, 192 segmented, 190 published, 2 lost`` (every frame counter)."""
    return ", ".join(f"{counts.get(word, 0)} {word}" for word in FRAME_COUNTERS)


def status_counts(counts: Mapping[str, int]) -> str:
    """The status line's part of a camera's counters: ``skipped 3 lost 0``."""
    return f"skipped {counts.get('skipped', 0)} lost {counts.get('lost', 0)}"


def sink_counts(health: Any) -> dict[str, Any]:
    """A sink's ``SinkHealth`` in these words (``dropped`` is ``lost`` here)."""
    data = dict(health.to_dict())
    data["lost"] = data.pop("dropped")
    return data


def sink_summary(health: Any) -> str:
    """``redis: 380 published, 0 lost, 1 reconnects``."""
    return (
        f"{health.name}: {health.published} published, {health.dropped} lost, "
        f"{health.reconnects} reconnects"
    )
