"""The live status of ``streamseg serve``: log lines when not on a terminal, one
redrawn line on a real pseudo-terminal."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable

import pytest

from streamseg.telemetry.counters import FRAME_COUNTERS
from tests.support.serve import ServeProcess, metric, service_pipeline, summary
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow

CAMERA = (
    r"(?P<cam>[\w-]+) (?P<fps>\d+\.\d) fps skipped (?P<skipped>\d+) lost (?P<lost>\d+)"
    r"(?: \[(?P<state>\w+)\])?"
)
PROCESSING = r"processing (?:-|p50 (?P<p50>\d+) ms p99 (?P<p99>\d+) ms)"
DELIVERY = r"delivery (?:-|p50 (?P<p50>\d+) ms p99 (?P<p99>\d+) ms)"


def synthetic(cam: str, seed: int, fps: int) -> dict[str, str]:
    return {"id": cam, "url": f"synthetic://?seed={seed}&width=160&height=120&fps={fps}&objects=3"}


@dataclasses.dataclass(frozen=True)
class Status:
    """One parsed status line: ``{camera: (fps, skipped, state)}``, processing latency
    and delivery delay (p50, p99 ms), Redis; ``lost``: ``{camera: lost}``."""

    cameras: dict[str, tuple[float, int, str | None]]
    lost: dict[str, int]
    p50: int | None
    p99: int | None
    delivery: tuple[int | None, int | None]
    redis: str


def parse_status(line: str) -> Status:
    *cams, processing, delivery, redis = line.split(" | ")
    parsed, lost = {}, {}
    for part in cams:
        m = re.fullmatch(CAMERA, part)
        assert m is not None, f"bad camera part {part!r} in {line!r}"
        parsed[m["cam"]] = (float(m["fps"]), int(m["skipped"]), m["state"])
        lost[m["cam"]] = int(m["lost"])
    lat = re.fullmatch(PROCESSING, processing)
    assert lat is not None, f"bad processing part {processing!r} in {line!r}"
    delay = re.fullmatch(DELIVERY, delivery)
    assert delay is not None, f"bad delivery part {delivery!r} in {line!r}"
    assert redis == "redis ok" or redis.startswith("redis DOWN"), line

    def ms(m: re.Match[str], key: str) -> int | None:
        return None if m[key] is None else int(m[key])

    return Status(
        parsed, lost, ms(lat, "p50"), ms(lat, "p99"), (ms(delay, "p50"), ms(delay, "p99")), redis
    )


def status_lines(proc: ServeProcess) -> list[str]:
    return [m.group(1) for m in re.finditer(r"streamseg\.status: status: (.*)", proc.log)]


@pytest.mark.parametrize("model_process", [False, True], ids=["in-process", "own-process"])
def test_status_lines_when_not_a_terminal(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, model_process: bool
) -> None:
    """The status lines, then the counters by the same names on /readyz, the
    metrics and the exit summary (``streamseg.telemetry.counters``)."""
    cams = [synthetic("north", 1, 10), synthetic("south", 2, 5)]
    runtime = {"torch_threads": 1, "status_interval": 1.0, "model_process": model_process}
    proc = serve(service_pipeline(cams, {"url": redis_server.url}, runtime=runtime), status=True)

    def both_measured() -> bool:
        return any(
            s.p50 is not None and all(fps > 0 for fps, _d, _s in s.cameras.values())
            for s in map(parse_status, status_lines(proc))
        )

    proc.wait_for(both_measured, 120, "a status line with fps for both cameras and latency")
    proc.wait_for(lambda: len(status_lines(proc)) >= 5, 30, "more status lines")
    ready, text = proc.readyz(), proc.get("/metrics")[1]
    for cam in ("north", "south"):
        counts = ready["cameras"][cam]["counts"]
        assert list(counts) == list(FRAME_COUNTERS)  # read, skipped, segmented, published, lost
        for word in FRAME_COUNTERS:
            assert metric(text, f"streamseg_frames_{word}_total", camera=cam) is not None or (
                counts[word] == 0 and word in ("skipped", "lost")  # none counted yet
            )
    assert set(ready["sinks"]["redis"]) >= {"published", "lost", "buffered"}
    assert "dropped" not in json.dumps(ready)  # no word with two meanings
    assert proc.terminate() == 0, proc.tail()

    parsed = [parse_status(s) for s in status_lines(proc)]
    assert all(set(p.cameras) == {"north", "south"} for p in parsed)
    measured = [p for p in parsed if p.p50 is not None and p.p99 is not None]
    assert measured and all(p.p50 <= p.p99 for p in measured)  # type: ignore[operator]
    delays = [p.delivery for p in parsed if p.delivery[0] is not None]
    assert delays and all(a <= b for a, b in delays)  # type: ignore[operator]
    for cam, fps in (("north", 10), ("south", 5)):
        rates = [p.cameras[cam][0] for p in parsed]
        skipped = [p.cameras[cam][1] for p in parsed]
        assert 0 < max(rates) <= 2 * fps, (cam, rates)  # segmented frames/s of this camera
        assert skipped == sorted(skipped), (cam, skipped)  # counted since start: never less
        # The same counters under the same names in the summary: nothing lost here.
        counts = summary(proc.log, cam)
        assert skipped[-1] <= counts["skipped"]
        assert [p.lost[cam] for p in parsed] == [0] * len(parsed) and counts["lost"] == 0
    # a streaming camera shows no state (a line printed while serve stops may
    # say "stopped"); nothing is drawn for a terminal
    states = [p.cameras["north"][2] for p in parsed]
    assert states[0] is None and set(states) <= {None, "stopped"}, states
    assert "\x1b[" not in proc.log


def test_status_line_redrawn_on_a_terminal(
    serve: Callable[..., ServeProcess], redis_server: RedisServer
) -> None:
    columns = 50
    cams = [synthetic("cam", 3, 10)]
    proc = serve(
        service_pipeline(cams, {"url": redis_server.url}), status=True, terminal=(24, columns)
    )
    clear = "\r\x1b[2K"

    def draws() -> list[str]:
        # Each status draw and each log record starts by clearing the line;
        # a draw is the text up to the next clear, with no newline after it.
        return [d for d in proc.output.split(clear) if d.startswith("cam ")]

    proc.wait_for(lambda: any(" fps skipped " in d and "p50" in d for d in draws()), 120, "a draw")
    proc.wait_for(lambda: len(draws()) >= 3, 30, "three draws")
    assert proc.terminate() == 0, proc.tail()

    out = proc.output
    drawn = draws()
    assert all("\n" not in d for d in drawn)  # redrawn in place, never scrolled
    assert all(len(d) <= columns - 1 for d in drawn)  # cut to the terminal's width
    assert max(len(d) for d in drawn) == columns - 1  # the full line is longer
    assert all(re.match(CAMERA + r" \| processing", d) for d in drawn), drawn
    assert "status: " not in out  # on a terminal the line is drawn, not logged
    # Log records clear the line first, so they never start in the middle of it.
    records = [line for line in out.split("\n") if " INFO " in line]
    assert records and all(line.startswith(clear) for line in records)
    assert "summary[cam]:" in out
