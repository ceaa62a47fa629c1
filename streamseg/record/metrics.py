"""Recording's metrics (OpenTelemetry instruments), read at export time from
``ClipHook.health()`` (docs/operations.md lists them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

__all__ = ["observe_recording"]

Health = Callable[[], Mapping[str, Any]]


def observe_recording(meter: Meter, health: Health) -> None:
    """Register recording's gauges and counters on ``meter``.

    ``health()`` is ``ClipHook.health()``: ``state`` (``recording`` or
    ``disk_full``), ``stops``, ``free_mb``, ``bytes`` per camera, ``removed``
    ``{reason: {files, bytes}}`` and ``clips_missed``.
    """

    def read(fn: Callable[[Mapping[str, Any]], list[Observation]]) -> Any:
        return lambda _options: fn(health())

    def removed(key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        return read(lambda h: [Observation(v[key], {"reason": r}) for r, v in h["removed"].items()])

    gauge, counter = meter.create_observable_gauge, meter.create_observable_counter
    gauge(
        "streamseg.record.recording",
        [read(lambda h: [Observation(int(h["state"] == "recording"))])],
        "1",
        "1 while clips are recorded, 0 while a full disk stops them",
    )
    counter(
        "streamseg.record.disk_full",
        [read(lambda h: [Observation(h["stops"])])],
        "{stop}",
        "times a full disk (ENOSPC) stopped recording",
    )
    counter(
        "streamseg.record.clips_missed",
        [read(lambda h: [Observation(h["clips_missed"])])],
        "{alert}",
        "alerts that got no clip because the disk was full",
    )
    gauge(
        "streamseg.record.free",
        [read(lambda h: [Observation(int(h["free_mb"] * 2**20))])],
        "By",
        "free bytes of the filesystem that holds record.dir",
    )
    gauge(
        "streamseg.record.stored",
        [read(lambda h: [Observation(b, {"camera": c}) for c, b in h["bytes"].items()])],
        "By",
        "bytes of recordings kept, per camera (at the last retention check)",
    )
    counter(
        "streamseg.record.removed",
        [removed("files")],
        "{file}",
        "recordings deleted by record.retention (reason)",
    )
    counter(
        "streamseg.record.removed_bytes",
        [removed("bytes")],
        "By",
        "bytes of recordings deleted by record.retention (reason)",
    )
