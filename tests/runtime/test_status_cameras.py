"""The status line follows cameras added and removed while running (issue: a camera
added through the console killed the status thread with ``KeyError``)."""

from __future__ import annotations

import io

from streamseg.runtime.stats import PipelineStats
from streamseg.runtime.status import StatusReporter


def test_cameras_added_and_removed_between_two_lines() -> None:
    stats = PipelineStats(["a"])
    served = {"a": "streaming"}
    reporter = StatusReporter(
        stats=stats, states=lambda: dict(served), sinks=lambda: {"redis": (True, 0)},
        interval=1.0, stream=io.StringIO(),
    )  # fmt: skip
    stats.segmented("a")
    assert reporter.line().startswith("a ")
    # c appears after the snapshot the reporter compares against was taken.
    stats.add_camera("c")
    served["c"] = "connecting"
    for _ in range(3):
        stats.segmented("c")
    line = reporter.line()
    cameras = [p.split(" ")[0] for p in line.split(" | ") if " fps skipped " in p]
    assert cameras == ["a", "c"] and "c 0.0 fps skipped 0 lost 0 [connecting]" not in line, line
    assert "[connecting]" in line, line
    # c is removed: its counts stay (the exit summary has them), the line leaves it out.
    del served["c"]
    line = reporter.line()
    assert [p.split(" ")[0] for p in line.split(" | ") if " fps skipped " in p] == ["a"], line
    assert stats.snapshot()["c"].segmented == 3


def test_the_reporter_thread_survives_a_failing_line() -> None:
    import time

    calls: list[int] = []

    def states() -> dict[str, str]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a camera's health could not be read")
        return {"a": "streaming"}

    out = io.StringIO()
    reporter = StatusReporter(
        stats=PipelineStats(["a"]), states=states, sinks=dict, interval=0.05, stream=out
    ).start()
    try:
        deadline = time.monotonic() + 5
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        reporter.close()
    assert len(calls) >= 3  # it went on after the first line failed
