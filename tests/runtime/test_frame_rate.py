"""One frame rate per camera (``streamseg.runtime.rates``), shown alike everywhere.

The issue: with every camera at 5.0 fps on the status line, the console's tile
footers said 3.8 and its live badges 4.8, 8.4 and 4.9: four displays, four
measures. Now ``PipelineStats.fps`` is the one figure: the status line, the
live badge (``LiveView``), the tiles (``/api/cameras``, ``ServiceConsole.fps``)
and the health chart (from the tiles' view) read it.
"""

from __future__ import annotations

import io
import time

import pytest
import torch

from streamseg.console.health import FIELDS, HealthHistory
from streamseg.console.live import LiveView
from streamseg.runtime.rates import FrameRate
from streamseg.runtime.stats import PipelineStats
from streamseg.runtime.status import StatusReporter
from streamseg.types import Frame, FrameResult, Instances


def test_a_bursty_batched_camera_reads_its_own_rate() -> None:
    """Frames captured every 0.2 s but segmented two at a time (a batch) are 5 fps,
    whatever the bursts; half of them skipped, 2.5; none for a while, 0."""
    rate = FrameRate(window=5.0)
    assert rate.value(now=0.0) is None
    for k in range(0, 40, 2):  # two frames per batch, handed over at once
        rate.add(1000.0 + k * 0.2)
        rate.add(1000.0 + (k + 1) * 0.2)
    assert rate.value(now=1008.0) == 5.0
    skipping = FrameRate(window=5.0)
    for k in range(0, 40, 2):  # the live policy skipped every other frame
        skipping.add(1000.0 + k * 0.2)
    assert skipping.value(now=1008.0) == pytest.approx(2.5)
    assert rate.value(now=1007.8 + 5.1) == 0.0  # stalled: nothing captured for the window
    slow = FrameRate(window=5.0)
    slow.add(0.0)
    slow.add(8.0)  # one frame per 8 s: a rate, not 0, until three intervals pass
    assert slow.value(now=10.0) == 0.125 and slow.value(now=33.0) == 0.0


def _result(camera: str, seq: int, capture_time: float) -> FrameResult:
    frame = Frame(camera, seq, None, capture_time, torch.zeros((4, 4, 3), dtype=torch.uint8))
    return FrameResult(frame.without_image(), Instances.empty((4, 4)))


def test_every_display_shows_the_one_figure() -> None:
    stats = PipelineStats(["a", "b"])
    reporter = StatusReporter(
        stats=stats, states=lambda: {"a": "streaming", "b": "streaming"},
        sinks=lambda: {"redis": (True, 0)}, interval=5.0, stream=io.StringIO(),
    )  # fmt: skip
    live = LiveView(fps_of=stats.fps)
    health = HealthHistory(interval=1.0)
    base = time.time() - 8.0  # capture times of the last 8 s
    with live.watch("a"):
        for k in range(30):  # a: 5 fps in batches of two; b: 4 fps one by one
            for j in (2 * k, 2 * k + 1) if k < 15 else ():
                stats.segmented("a", base + j * 0.2)
                live.offer(torch.zeros((4, 4, 3), dtype=torch.uint8), _result("a", j, 0.0), {})
            stats.segmented("b", base + k * 0.25)
        fps = {c: stats.fps(c) for c in "ab"}
        assert fps == pytest.approx({"a": 5.0, "b": 4.0}), fps
        # The badge drawn on a's live frames.
        frame = live.latest("a")
        assert frame is not None and frame.fps == pytest.approx(5.0)
    # The status line (its clock is now: both are recent enough).
    line = reporter.line()
    assert line.startswith("a 5.0 fps ") and " | b 4.0 fps " in line, line
    # The health chart takes the figure the tiles show (ServiceConsole.fps, rounded).
    view = {c: {"fps": round(fps[c] or 0.0, 2), "segmented": 30, "skipped": 0} for c in "ab"}
    health.sample(view, now=10.0)
    health.sample(view, now=11.0)
    assert [health.series(c)[-1][FIELDS.index("fps")] for c in "ab"] == [5.0, 4.0]
