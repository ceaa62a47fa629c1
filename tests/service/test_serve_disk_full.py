"""``serve`` with clips on a real small filesystem (a tmpfs the test mounts) that fills up.

While the disk is full, recording stops with a clear state (``/readyz``,
the camera's health, the metrics) and ONE ``disk_full`` alert, and serving
goes on: detections and the rules' alerts keep reaching Redis. When space
is back, recording resumes and new clips are written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from streamseg.schemas import load_schema
from tests.conftest import run_cli
from tests.support.browser import available as browser_available
from tests.support.browser import browser
from tests.support.console import call
from tests.support.serve import REPO, ServeProcess, metric, service_pipeline
from tests.support.servers import RedisServer
from tests.support.tmpfs import fill, tmpfs

__all__ = ["tmpfs"]

pytestmark = pytest.mark.slow

# The whole frame is a zone: every new track (the scene loops) raises an alert, and a clip.
RULES = {
    "cameras": {
        "clip": {
            "coordinates": "normalized",
            "zones": {"all": {"polygon": [[0, 0], [1, 0], [1, 1], [0, 1]]}},
            "rules": [{"name": "anyone", "type": "zone", "zone": "all", "include_mask": False}],
        }
    }
}


def _alerts(redis_server: RedisServer) -> list[dict[str, Any]]:
    entries = redis_server.client().xrange("streamseg:alerts")
    return [json.loads(fields[b"data"]) for _id, fields in entries]


def _clips(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.mp4") if p.stat().st_size > 0]


def _console_says_recording_stopped(proc: ServeProcess) -> None:
    from selenium.webdriver.common.by import By

    with browser() as driver:
        driver.get(f"http://127.0.0.1:{proc.http_port}/")
        cell = '#health-rows tr[data-camera="clip"] td:nth-child(2)'

        def state() -> str:
            found = driver.find_elements(By.CSS_SELECTOR, cell)
            return str(found[0].text) if found else ""

        text = proc.wait_for(lambda: "RECORDING STOPPED" in state() and state(), 20, "the page")
        assert text.startswith("streaming") and "disk full" in text


def test_a_full_disk_stops_recording_not_serving_and_recording_resumes(
    serve: Callable[..., ServeProcess],
    redis_server: RedisServer,
    tmp_path: Path,
    tmpfs: Callable[[int], Path],
) -> None:
    scene = tmp_path / "scene"
    args = ["synth", "--out", str(scene), "--seed", "1001", "--frames", "150", "--fps", "10"]
    made = run_cli(*args, "--size", "240x320", "--objects", "4")
    assert made.returncode == 0, made.stderr
    rec = tmpfs(4 * 2**20)
    cam = {"id": "clip", "url": str(scene / "scene.mp4"), "realtime": True, "loop": True}
    config = service_pipeline([cam], {"url": redis_server.url}, alerts=RULES)
    config["model"] = {"arch": "maskrcnn_small", "weights": str(REPO / "models/demo_small.pth")}
    config["record"] = {
        "dir": str(rec),
        "clips": {"enabled": True, "before_s": 1.0, "after_s": 1.0},
        "retention": {"resume_free_mb": 1.0, "retry_s": 0.5},
    }
    proc = serve(config)
    client = redis_server.client()
    proc.wait_for(lambda: _clips(rec), 180, "a first clip (the disk has room)")
    assert proc.readyz()["recording"]["state"] == "recording"

    fill(rec / "ballast.bin")  # another program fills the disk
    full = proc.wait_for(
        lambda: (r := proc.readyz())["recording"]["state"] == "disk_full" and r, 120, "disk_full"
    )
    assert full["ready"] is True  # serving is not affected
    assert full["cameras"]["clip"]["recording"] == "disk_full"
    assert "No space left on device" in full["recording"]["last_error"]
    code, health = call(proc.http_port, "GET", "/api/health")  # the console's camera table
    assert code == 200 and health["cameras"]["clip"]["recording"] == "disk_full"
    if browser_available():  # and the page says so (the API is checked either way)
        _console_says_recording_stopped(proc)
    stopped = [a for a in _alerts(redis_server) if a["kind"] == "disk_full"]
    assert len(stopped) == 1 and stopped[0]["rule"] == "record"
    assert stopped[0]["camera_id"] == "clip" and stopped[0]["extra"]["dir"] == str(rec)
    jsonschema.Draft202012Validator(load_schema("alert")).validate(stopped[0])
    code, text = proc.get("/metrics")
    assert code == 200 and metric(text, "streamseg_record_recording") == 0
    assert metric(text, "streamseg_record_disk_full_total") == 1

    # Serving and publishing go on: frames and the rules' alerts keep coming.
    frames = client.xlen("streamseg:detections:clip")
    rules_before = sum(a["rule"] == "anyone" for a in _alerts(redis_server))
    proc.wait_for(
        lambda: sum(a["rule"] == "anyone" for a in _alerts(redis_server)) > rules_before,
        90,
        "a rule's alert while recording is stopped",
    )
    assert client.xlen("streamseg:detections:clip") > frames
    missed = proc.wait_for(lambda: proc.readyz()["recording"]["clips_missed"], 10, "missed")
    assert missed >= 1 and proc.readyz()["recording"]["state"] == "disk_full"

    before = set(_clips(rec))
    (rec / "ballast.bin").unlink()  # space is back
    proc.wait_for(lambda: proc.readyz()["recording"]["state"] == "recording", 30, "recording again")
    resumed = time.time()
    new = proc.wait_for(lambda: set(_clips(rec)) - before, 120, "a clip after resuming")
    assert all(p.stat().st_mtime >= resumed - 1 for p in new)
    ready = proc.readyz()
    assert ready["cameras"]["clip"]["recording"] == "recording" and ready["recording"]["stops"] == 1
    assert [a["kind"] for a in _alerts(redis_server)].count("disk_full") == 1  # ONE alert
    code, text = proc.get("/metrics")
    assert metric(text, "streamseg_record_recording") == 1
    assert proc.terminate(timeout=60) == 0, proc.tail()
    assert "Traceback" not in proc.log
    assert "recording resumes" in proc.log
