"""One console for a fleet, in a real browser (Debian's headless Chromium): two real
``serve`` workers of capacity 1 each serve one camera each. Worker w0's console
lists both cameras with their owner; the live view of the camera w1 serves is
fetched from w1's console (its frames are w1's, as published to Redis); the
events list w1's alerts (read from the Redis alert stream) beside w0's own, with
w1's snapshot; when w1 leaves, w0 takes its camera and the tile shows w0's frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamseg.console.fleet import HOP
from streamseg.fleet.placement import place
from streamseg.fleet.store import FleetStore
from tests.service.test_console_browser import PIXELS_JS, SNAPSHOT_JS
from tests.support.browser import browser, screenshot
from tests.support.console import call
from tests.support.serve import ServeProcess, detections, service_pipeline
from tests.support.servers import RedisServer, free_port
from tests.support.waiting import poll

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOKEN = "fleet-console-token"
WHOLE = {"polygon": [[0, 0], [160, 0], [160, 120], [0, 120]]}


def _worker(tmp_path: Path, name: str, redis: RedisServer) -> ServeProcess:
    cams = [
        {"id": cid, "url": f"synthetic://?seed={i + 1}&width=160&height=120&fps=4&objects=3"}
        for i, cid in enumerate("ab")
    ]
    # Random weights score about 0.2: low thresholds make tracks, and tracks enter the zone.
    tracking = {"high_score": 0.05, "low_score": 0.01, "new_track_score": 0.05, "confirm_hits": 2}
    config = service_pipeline(cams, {"url": redis.url}, tracking=tracking)
    rules = [{"name": "in", "type": "zone", "zone": "all"}]
    config["alerts"] = {"cameras": {c: {"zones": {"all": WHOLE}, "rules": rules} for c in "ab"}}
    config["fleet"] = {"name": name, "capacity": 1, "lease_s": 3}
    config["http"] = {"host": "127.0.0.1", "port": free_port(), "token": TOKEN}
    folder = tmp_path / name
    folder.mkdir()
    return ServeProcess(config, folder).start()


def _tiles(driver: Any) -> dict[str, dict[str, str | None]]:
    from selenium.webdriver.common.by import By

    return {
        t.get_attribute("data-camera"): {
            "owner": t.get_attribute("data-owner"),
            "remote": t.get_attribute("data-remote"),
            "state": t.get_attribute("data-state"),
            "link": t.find_element(By.CSS_SELECTOR, ".owner").get_attribute("href"),
        }
        for t in driver.find_elements(By.CSS_SELECTOR, "article.tile")
    }


def test_one_console_shows_the_whole_fleet(tmp_path: Path, redis_server: RedisServer) -> None:
    from selenium.webdriver.common.by import By

    w0 = _worker(tmp_path, "w0", redis_server)
    w1 = _worker(tmp_path, "w1", redis_server)
    store = FleetStore(redis_server.client(), prefix="streamseg")
    client = redis_server.client()
    try:
        for w in (w0, w1):
            w.wait_for(lambda w=w: w.readyz().get("ready"), 300, "ready (model loaded, joined)")

        def owners() -> dict[str, str | None]:
            return {c: r["owner"] for c, r in store.snapshot()["cameras"].items()}

        w0.wait_for(lambda: sorted(map(str, owners().values())) == ["w0", "w1"], 60,
                    "one camera on each worker")  # fmt: skip
        mine, theirs = sorted(owners(), key=lambda c: str(owners()[c]))
        w1_console = f"http://127.0.0.1:{w1.http_port}"
        with browser() as driver:
            driver.get(f"http://127.0.0.1:{w0.http_port}/?token={TOKEN}")
            poll(lambda: {c: t["state"] for c, t in _tiles(driver).items()}
                 == {"a": "streaming", "b": "streaming"}, 60, "both tiles streaming")  # fmt: skip
            tiles = _tiles(driver)
            assert tiles[mine]["owner"] == "w0" and tiles[mine]["remote"] == "false"
            assert tiles[theirs]["owner"] == "w1" and tiles[theirs]["remote"] == "true"
            assert (tiles[theirs]["link"] or "").rstrip("/") == w1_console
            assert tiles[mine]["link"] is None

            # The live view of w1's camera, fetched through w0 from w1: frames that move.
            first = poll(lambda: driver.execute_script(PIXELS_JS, theirs), 20, "a frame of w1's")
            assert first[:2] == [160, 120]
            poll(lambda: driver.execute_script(PIXELS_JS, theirs)[2] != first[2], 15, "new frames")
            screenshot(driver, "fleet-grid")
            # One frame through w0 is w1's: its sequence number was published by w1.
            code, jpeg = call(w0.http_port, "GET", f"/api/cameras/{theirs}/frame.jpg", token=TOKEN)
            assert code == 200 and jpeg[:2] == b"\xff\xd8", code
            # Passed on once only: a request w0 passed on is not passed on again.
            req = f"http://127.0.0.1:{w0.http_port}/api/cameras/{theirs}/frame.jpg"
            assert _get(req, {HOP: "1", "Authorization": f"Bearer {TOKEN}"}) == 404
            # w1 publishes it since it took it (w0 may have held it while w1 was starting:
            # a handover, never the two interleaved).
            workers = [m["worker"] for m in detections(client, theirs)[-20:]]
            assert workers[-1] == "w1" and "w0" not in workers[workers.index("w1") :], workers

            # The events list both workers' alerts; w1's snapshot comes from w1.
            def alerts_of(worker: str) -> bool:
                found = [json.loads(f[b"data"]) for _i, f in client.xrange("streamseg:alerts")]
                return any(m.get("worker") == worker for m in found)

            w0.wait_for(lambda: alerts_of("w0") and alerts_of("w1"), 60, "alerts of both")
            item = f'#event-list li[data-worker="w1"][data-camera="{theirs}"]'
            poll(lambda: driver.find_elements(By.CSS_SELECTOR, item), 5, "w1's event listed")
            own = f'#event-list li[data-camera="{mine}"]'
            poll(lambda: driver.find_elements(By.CSS_SELECTOR, own), 5, "w0's own event listed")
            driver.find_elements(By.CSS_SELECTOR, item)[0].click()
            snap = driver.find_element(By.ID, "event-snapshot")
            poll(lambda: driver.execute_script("return arguments[0].naturalWidth", snap), 10,
                 "w1's snapshot through w0")  # fmt: skip
            assert len(driver.execute_script(SNAPSHOT_JS, snap)) > 0
            listed = call(w0.http_port, "GET", f"/api/events?camera={theirs}", token=TOKEN)[1]
            # w1's alerts of its camera (w0's own, from a moment it held it at start, may be there)
            assert "w1" in {e.get("worker") for e in listed["events"]}, listed["events"]
            screenshot(driver, "fleet-events")

            # Health: w1's camera with its owner.
            row = f'#health-rows tr[data-camera="{theirs}"]'
            poll(lambda: "(on w1)" in driver.find_element(By.CSS_SELECTOR, row).text, 10,
                 "the health row of w1's camera")  # fmt: skip

            # w1 leaves: w0 (capacity 1) serves what the placement gives it alone; here
            # it hands its own camera over and takes w1's, whose tile then shows w0's frames.
            after = place(["a", "b"], {"w0": 1})
            assert after[theirs] == "w0", after  # what the ids and names give
            assert w1.terminate() == 0, w1.tail()
            poll(lambda: {c: (t["owner"], t["state"]) for c, t in _tiles(driver).items()}
                 == {theirs: ("w0", "streaming"), mine: ("", "unassigned")}, 30,
                 "the handover in the page")  # fmt: skip
            assert _tiles(driver)[theirs]["remote"] == "false"
            moved = poll(lambda: driver.execute_script(PIXELS_JS, theirs), 20, "a frame of w0's")
            poll(lambda: driver.execute_script(PIXELS_JS, theirs)[2] != moved[2], 15, "new frames")
            screenshot(driver, "fleet-handover")
    finally:
        for w in (w0, w1):
            w.terminate()


def _get(url: str, headers: dict[str, str]) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
