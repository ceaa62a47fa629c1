"""The live status: a one-line display on a terminal, periodic log lines otherwise.

Example::

    cam1 14.8 fps skipped 3 lost 0 | cam2 15.0 fps skipped 0 lost 0 |
    processing p50 112 ms p99 240 ms | delivery p50 2 ms p99 9 ms | redis ok   (one line)

Per camera its frames per second (``PipelineStats.fps``, the one figure
every display of it shows: :mod:`streamseg.runtime.rates`) and the frame counters
``skipped`` and ``lost`` (what each means: :mod:`streamseg.telemetry.counters`,
the one owner of these words). ``processing``: capture to publish (the
frame's messages handed to the sinks); ``delivery``: publish to a sink's
acknowledgement, over every sink. A sink that is away raises the second,
never the first. One entry per sink at the end: ``<sink> ok``, or ``<sink>
DOWN (N buffered)``. Cameras added while running appear at the next line,
removed ones leave it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from streamseg.runtime.stats import CameraCounts, PipelineStats
from streamseg.telemetry.counters import status_counts

__all__ = ["StatusReporter", "format_status", "unfinished"]

log = logging.getLogger("streamseg.status")


def format_status(
    rates: dict[str, float],
    counts: dict[str, CameraCounts],
    states: dict[str, str],
    processing: Sequence[float | None],
    delivery: Sequence[float | None],
    sinks: Mapping[str, tuple[bool, int]],
) -> str:
    """One status line (fps per camera, skipped and lost
    frames, the two latencies, sinks).

    ``processing`` / ``delivery``: ``(p50, p99)`` seconds (``None``: not
    measured yet); ``sinks``: ``{name: (connected, messages buffered)}``.
    """
    parts = []
    for cid, c in counts.items():
        state = states.get(cid, "")
        extra = f" [{state}]" if state not in ("streaming", "") else ""
        counts_text = status_counts(c.as_dict())
        parts.append(f"{cid} {rates.get(cid, 0.0):.1f} fps {counts_text}{extra}")
    out = [
        f"{n} ok" if ok else f"{n} DOWN ({buffered} buffered)"
        for n, (ok, buffered) in sinks.items()
    ]
    latencies = [_percentiles("processing", processing), _percentiles("delivery", delivery)]
    return " | ".join([*parts, *latencies, *out])


def _percentiles(name: str, values: Sequence[float | None]) -> str:
    p50, p99 = values
    if p50 is None or p99 is None:
        return f"{name} -"
    return f"{name} p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms"


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
        self.tty = self.stream.isatty()
        self.interval = 1.0 if self.tty else interval
        self._stats, self._states, self._sinks = stats, states, sinks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status", daemon=True)

    def start(self) -> StatusReporter:
        self._thread.start()
        return self

    def line(self) -> str:
        counts = self._stats.snapshot()
        states = self._states()
        # The cameras served now: one added since the last line counts from
        # zero, one removed since is left out (its counts stay for the summary).
        shown = {c: n for c, n in counts.items() if c in states}
        rates = {c: self._stats.fps(c) or 0.0 for c in shown}  # the figure the console shows
        processing = self._stats.processing_percentiles(50, 99)
        delivery = self._stats.delivery_percentiles(50, 99)
        return format_status(rates, shown, states, processing, delivery, self._sinks())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._emit(self.line())
            except Exception:  # one bad line must not end the status for the rest of the run
                log.exception("status: the status line failed")

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


def unfinished(
    counts: Mapping[str, CameraCounts],
    sinks: Mapping[str, tuple[bool, int]],
    running: Sequence[str],
) -> str:
    """What a drain still waits for, in words: each camera's frames neither
    published nor lost, each sink's buffered messages, the stage threads running."""
    parts = [
        f"{cid}: {left} frames"
        for cid, c in counts.items()
        if (left := c.read - c.skipped - c.published - c.lost) > 0
    ]
    parts += [
        f"sink {name}: {buffered} buffered" for name, (_c, buffered) in sinks.items() if buffered
    ]
    parts.append("stages still running: " + (", ".join(running) or "none"))
    return "; ".join(parts)
