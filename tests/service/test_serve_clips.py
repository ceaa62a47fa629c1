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
from typing import Any

import av
import pytest

from tests.conftest import run_cli
from tests.support.browser import available as browser_available
from tests.support.browser import browser
from tests.support.console import call
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


def _clip_link_in_page(driver: Any, proc: ServeProcess, event: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"http://127.0.0.1:{proc.http_port}/")
    item = f'li[data-event="{event["id"]}"]'
    proc.wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, item), 10, "the event listed")
    driver.find_element(By.CSS_SELECTOR, item).click()
    link = driver.find_element(By.ID, "event-clip")
    href = proc.wait_for(lambda: link.get_attribute("href"), 10, "the clip link in the page")
    assert link.is_displayed() and href.endswith(event["clip"]), href


def _ready_clip(port: int) -> dict[str, Any] | None:
    try:
        code, data = call(port, "GET", "/api/events")
    except OSError:  # the web server is not up yet
        return None
    if code != 200:
        return None
    return next((e for e in data["events"] if e["clip_ready"]), None)


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
    # While it runs, the console's events link each alert's clip once it is written.
    fetched = tmp_path / "from-console.mp4"
    if browser_available():  # the page shows the link (the API is checked either way)
        with browser() as driver:
            ready = proc.wait_for(lambda: _ready_clip(proc.http_port), 150, "a clip")
            _clip_link_in_page(driver, proc, ready)
    else:
        ready = proc.wait_for(lambda: _ready_clip(proc.http_port), 150, "a clip")
    code, data = call(proc.http_port, "GET", ready["clip"])
    assert code == 200 and isinstance(data, bytes), (code, data)
    fetched.write_bytes(data)
    first, last, _n = _times(fetched)
    assert first - 1e-6 <= ready["pts"] <= last + 1e-6
    assert call(proc.http_port, "GET", "/api/events/999999/clip")[0] == 404
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
