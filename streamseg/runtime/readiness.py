"""What ``serve`` reports of its parts: ``/readyz``'s cameras, sinks and parts
that are off, and the summary it logs at exit.

``Service.readiness`` assembles ``/readyz`` from these and the model's
health: ``cameras_and_sinks`` reads the running pipeline (or, before it
exists, the configured cameras and sinks as not yet connected), and
``degraded`` lists the parts that are off while the rest runs (alert rules
disabled because they failed, ``TrackingStage.degraded``). ``log_summary``
logs the exit summary in the words of ``streamseg.telemetry.counters``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamseg.runtime.segmenting import describe_error
from streamseg.telemetry.counters import camera_summary, sink_counts, sink_summary

if TYPE_CHECKING:
    from streamseg.ingest.config import CameraConfig
    from streamseg.publish.sink_config import SinkConfig
    from streamseg.runtime.pipeline import Pipeline

__all__ = ["READY_CAMERA_STATES", "cameras_and_sinks", "degraded", "log_summary", "readiness"]

READY_CAMERA_STATES = ("streaming", "finished")

log = logging.getLogger("streamseg.runtime")


def readiness(
    pipeline: Pipeline | None,
    cameras: Sequence[CameraConfig],
    sinks: Sequence[SinkConfig],
    *,
    model: dict[str, Any],
    stopping: bool,
    recording: Callable[[list[str]], dict[str, Any]] | None = None,
    idle_ready: bool = False,
) -> tuple[bool, dict[str, Any]]:
    """``(ready, details)`` of ``/readyz`` (``Service.readiness``), given the model's
    health (``streamseg.hosting.health``), whether the service is stopping and,
    with clips on, ``recording(camera_ids)``: recording's state (``disk_full``
    when a full disk stopped it, ``record.retention``), also set per camera.
    ``idle_ready``: ready without a streaming camera (a fleet worker that has
    joined and waits for cameras to take)."""
    cams, sink_health = cameras_and_sinks(pipeline, cameras, sinks)
    record_state = recording(list(cams)) if recording is not None else None
    for cid, state in (record_state or {}).get("cameras", {}).items():
        cams[cid]["recording"] = state
    ready = (
        model["state"] == "running"
        and all(s["connected"] for s in sink_health.values())
        and (any(d.get("state") in READY_CAMERA_STATES for d in cams.values()) or idle_ready)
        and not stopping
    )
    off = degraded(pipeline)
    details: dict[str, Any] = {
        "status": "degraded" if off else "ok",
        "degraded": off,
        "model": model,
        "sinks": sink_health,
        "cameras": cams,
        "stopping": stopping,
        "recording": record_state,
        # Two latencies: capture -> publish, and publish -> each sink's acknowledgement.
        "latency": pipeline.stats.latency_details() if pipeline is not None else None,
    }
    return ready, details


def cameras_and_sinks(
    pipeline: Pipeline | None, cameras: Sequence[CameraConfig], sinks: Sequence[SinkConfig]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(cameras, sinks)`` of ``/readyz``: ``cameras[id]``: the camera's health with
    ``counts`` (its frame counters); ``sinks[name]``: ``{type, connected, buffered,
    published, lost, errors, reconnects}`` (``streamseg.telemetry.counters``)."""
    if pipeline is None:
        cams: dict[str, Any] = {c.id: {"state": "connecting"} for c in cameras}
        out: dict[str, Any] = {
            "redis": {"type": "redis", "connected": False},
            **{s.name: {"type": s.type, "connected": False} for s in sinks},
        }
        return cams, out
    counts = pipeline.stats.snapshot()
    cams = {}
    for cid, (_s, _r, d) in pipeline.camera_states().items():
        c = counts.get(cid)
        cams[cid] = {**d, "counts": c.as_dict() if c is not None else {}}
    out = {}
    for sink in pipeline.sinks:
        health = sink_counts(sink.health())
        out[health.pop("name")] = health
    return cams, out


def degraded(pipeline: Pipeline | None) -> dict[str, Any]:
    """The parts that are off while the rest runs: ``{"rules": {camera: {rule: why}}}``
    for alert rules disabled because they failed; empty when all is well."""
    if pipeline is None:
        return {}
    rules = {c: dict(r) for c, r in pipeline.tracker.degraded().items()}
    return {"rules": rules} if rules else {}


def log_summary(pipeline: Pipeline) -> None:
    """The exit summary: every camera's frame counters, the latency, every sink's messages."""
    p50, p99 = pipeline.stats.latency_percentiles(50, 99)
    for cid, c in pipeline.stats.snapshot().items():
        log.info("summary[%s]: frames %s", cid, camera_summary(c.as_dict()))
    sinks = "; ".join(f"messages {sink_summary(s.health())}" for s in pipeline.sinks)
    log.info("summary: latency p50 %s p99 %s; %s", _ms(p50), _ms(p99), sinks)
    if pipeline.failure is not None:
        log.error("runtime: stopped because of a failure: %s", describe_error(pipeline.failure))


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms"
