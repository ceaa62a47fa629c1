"""The live status: a one-line display on a terminal, periodic log lines otherwise.

Example::

    cam1 14.8 fps skipped 3 lost 0 | cam2 15.0 fps skipped 0 lost 0 | latency p50 112 ms
    p99 240 ms | redis ok          (one line)

Per camera its segmented frames per second and the frame counters
``skipped`` and ``lost`` (what each means: :mod:`streamseg.telemetry.counters`,
the one owner of these words). One entry per sink at the end: ``<sink>
ok``, or ``<sink> DOWN (N buffered)``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from streamseg.runtime.stats import CameraCounts, PipelineStats
from streamseg.telemetry.counters import status_counts

__all__ = ["StatusReporter", "format_status"]

log = logging.getLogger("streamseg.status")


def format_status(
    rates: dict[str, float],
    counts: dict[str, CameraCounts],
    states: dict[str, str],
    p50: float | None,
    p99: float | None,
    sinks: Mapping[str, tuple[bool, int]],
) -> str:
    """One status line (fps per camera over the last interval, skipped and lost
    frames, latency, sinks).

    ``sinks``: ``{name: (connected, messages buffered)}``.
    """
    parts = []
    for cid, c in counts.items():
        state = states.get(cid, "")
        extra = f" [{state}]" if state not in ("streaming", "") else ""
        counts_text = status_counts(c.as_dict())
        parts.append(f"{cid} {rates.get(cid, 0.0):.1f} fps {counts_text}{extra}")
    lat = "latency -"
    if p50 is not None and p99 is not None:
        lat = f"latency p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms"
    out = [
        f"{n} ok" if ok else f"{n} DOWN ({buffered} buffered)"
        for n, (ok, buffered) in sinks.items()
    ]
    return " | ".join([*parts, lat, *out])


class StatusReporter:
    """A thread that reports the pipeline's status every ``interval`` seconds.

    On a terminal it redraws one line in place (every second); otherwise it
    logs the same line at INFO every ``interval`` seconds.
    """

    def __init__(
        self,
        *,
        stats: PipelineStats,
        states: Callable[[], dict[str, str]],
        sinks: Callable[[], Mapping[str, tuple[bool, int]]],
        interval: float,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = 1.0 if self.tty else interval
        self._stats, self._states, self._sinks = stats, states, sinks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status", daemon=True)
        self._last = (time.monotonic(), stats.snapshot())

    def start(self) -> StatusReporter:
        self._thread.start()
        return self

    def line(self) -> str:
        now, counts = time.monotonic(), self._stats.snapshot()
        then, before = self._last
        self._last = (now, counts)
        dt = max(now - then, 1e-6)
        rates = {c: (counts[c].segmented - before[c].segmented) / dt for c in counts}
        p50, p99 = self._stats.latency_percentiles(50, 99)
        return format_status(rates, counts, self._states(), p50, p99, self._sinks())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._emit(self.line())

    def _emit(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + line[: _columns(self.stream) - 1])
            self.stream.flush()
        else:
            log.info("status: %s", line)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def _columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (not necessarily stdout's)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or 120
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size((120, 20)).columns
