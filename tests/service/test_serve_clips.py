"""``serve`` with ``record.clips``: each alert gets a playable clip of raw footage around it.

The demo model watches a synthetic clip (a file source paced at its frame
rate) with a line rule through the middle; every published alert must fall
inside a clip written for it, and each clip is a remux of the source's
packets that a decoder plays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import av
import pytest

from tests.conftest import run_cli
from tests.support.serve import REPO, ServeProcess, service_pipeline
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow

RULES = {
    "cameras": {
        "clip": {
            "coordinates": "normalized",
            "lines": {"middle": {"points": [[0.5, 0.0], [0.5, 1.0]]}},
            "rules": [{"name": "cross", "type": "line", "line": "middle", "include_mask": False}],
        }
    }
}


def _times(path: Path) -> tuple[float, float, int]:
    """First and last presentation time (seconds) of a playable file, and its frame count."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        times = [float(f.pts * stream.time_base) for f in container.decode(stream)]
    return min(times), max(times), len(times)


def test_alerts_get_clips_of_the_raw_footage(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    scene = tmp_path / "scene"
    args = ["synth", "--out", str(scene), "--seed", "1001", "--frames", "150", "--fps", "10"]
    made = run_cli(*args, "--size", "240x320", "--objects", "4")
    assert made.returncode == 0, made.stderr
    cams = [{"id": "clip", "url": str(scene / "scene.mp4"), "realtime": True, "live": False}]
    config = service_pipeline(cams, {"url": redis_server.url}, alerts=RULES)
    config["model"] = {"arch": "maskrcnn_small", "weights": str(REPO / "models/demo_small.pth")}
    clips = {"enabled": True, "before_s": 1.0, "after_s": 1.0}
    config["record"] = {"dir": str(tmp_path / "rec"), "clips": clips}
    proc = serve(config)
    assert proc.wait(180) == 0, proc.tail()

    alerts = [json.loads(f[b"data"]) for _id, f in redis_server.client().xrange("streamseg:alerts")]
    assert alerts, "no line crossing in 15 s of the scene"
    files = sorted((tmp_path / "rec").rglob("*.mp4"))
    written = {Path(p) for p in re.findall(r"clip (\S+) \(alert at [\d.]+s\)", proc.log)}
    assert written == set(files) and files
    spans = {f: _times(f) for f in files}
    for alert in alerts:
        inside = [f for f, (a, b, _n) in spans.items() if a - 1e-6 <= alert["pts"] <= b + 1e-6]
        assert inside, f"alert at {alert['pts']} s has no clip: {spans}"
    for first, last, frames in spans.values():
        # At least the second before and after an alert (unless the scene ends).
        assert frames >= 10 and last - first >= 1.0
