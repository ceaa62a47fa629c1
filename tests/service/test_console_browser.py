"""The console in a real browser (Debian's headless Chromium) against a real ``serve``.

The live grid shows every camera streaming, with frames that change, and
the pixels of each track's colour lie on that track's mask as published to
Redis for the same frame (the model has random weights, so the published
masks stand in for the ground truth there). With the trained demo model,
the track colours the browser shows lie on the synthetic scene's exact
masks of the frame they are drawn on. A
zone drawn on the live frame in the page is refused without the token
(nothing changes) and, with it, saved: its rule then raises alerts in
Redis without a restart, which the events timeline lists within a second,
with a snapshot that shows the zone. Screenshots of each step are kept as
artefacts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.support.browser import browser, screenshot
from tests.support.console import TOKEN, console_pipeline
from tests.support.serve import REPO, ServeProcess
from tests.support.servers import RedisServer, free_port
from tests.support.waiting import poll

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DEMO = REPO / "models" / "demo_small.pth"

# The live image's pixels, drawn into a canvas (same origin: readable).
PIXELS_JS = """
const img = document.querySelector(`article[data-camera="${arguments[0]}"] img`);
if (!img || !img.naturalWidth) return null;
const c = document.createElement("canvas");
c.width = img.naturalWidth; c.height = img.naturalHeight;
const g = c.getContext("2d");
g.drawImage(img, 0, 0);
return [c.width, c.height, Array.from(g.getImageData(0, 0, c.width, c.height).data)];
"""


SNAPSHOT_JS = """
const img = arguments[0];
const c = document.createElement("canvas");
c.width = img.naturalWidth; c.height = img.naturalHeight;
const g = c.getContext("2d");
g.drawImage(img, 0, 0);
return Array.from(g.getImageData(0, 0, c.width, c.height).data);
"""


# One live frame as the page gets it, lossless, with the sequence number it belongs to.
FRAME_JS = """
const done = arguments[arguments.length - 1];
fetch("/api/cameras/a/frame.png").then(async (r) => {
  const seq = Number(r.headers.get("X-Frame-Seq"));
  const bitmap = await createImageBitmap(await r.blob());
  const c = document.createElement("canvas");
  c.width = bitmap.width; c.height = bitmap.height;
  const g = c.getContext("2d");
  g.drawImage(bitmap, 0, 0);
  done([seq, c.width, c.height, Array.from(g.getImageData(0, 0, c.width, c.height).data)]);
}).catch((e) => done(String(e)));
"""


def check_overlay_on_masks(driver: Any, redis_server: RedisServer) -> None:
    """Pixels of a track's colour in a frame the browser got lie on that track's published mask."""
    from streamseg.console.overlay import track_color
    from streamseg.ops import rle_to_mask
    from tests.support.serve import detections

    client = redis_server.client()
    checked = 0
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 5 and time.monotonic() < deadline:
        seq, w, h, data = driver.execute_async_script(FRAME_JS)
        if seq in seen:  # fetched again before the camera's next frame (8 fps)
            time.sleep(0.05)
            continue
        seen.add(seq)
        pixels = np.asarray(data, np.uint8).reshape(h, w, 4)[..., :3]
        message = poll(
            lambda seq=seq: next((m for m in detections(client, "a") if m["seq"] == seq), None),
            10,
            f"the detections of frame {seq}",
        )
        for inst in message["instances"]:
            tid = inst.get("track_id")
            if tid is None or tid < 0 or inst.get("mask") is None:
                continue
            on_colour = np.all(pixels == np.asarray(track_color(tid), np.uint8), axis=-1)
            mask = rle_to_mask(inst["mask"]).numpy()
            assert (on_colour & ~mask).sum() == 0, f"track {tid}: its colour is off its mask"
            checked += int(on_colour.sum() > 0)
        if checked:
            break
    assert checked, f"no tracked instance was drawn in frames {sorted(seen)}"


def check_events_panel(driver: Any, item: str) -> None:
    """The events panel is readable: the list wide, the snapshot beside it (not under
    it), one column per field; the filter's choices are the cameras and the kinds."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from streamseg.track.alerts import ALERT_KINDS

    listing = driver.find_element(By.ID, "event-list")
    snap = driver.find_element(By.ID, "event-snapshot")
    assert listing.size["width"] >= 500, listing.size
    assert snap.location["x"] >= listing.location["x"] + listing.size["width"]
    assert snap.location["y"] < listing.location["y"] + listing.size["height"]
    cells = driver.find_elements(By.CSS_SELECTOR, item)[0].find_elements(By.TAG_NAME, "span")
    assert [c.get_attribute("class") for c in cells] == [
        "time", "camera", "rule", "kind", "what", "where",
    ]  # fmt: skip
    kind = Select(driver.find_element(By.CSS_SELECTOR, '#event-filter select[name="kind"]'))
    camera = Select(driver.find_element(By.CSS_SELECTOR, '#event-filter select[name="camera"]'))
    assert [o.get_attribute("value") for o in kind.options] == ["", *ALERT_KINDS]
    assert [o.get_attribute("value") for o in camera.options] == ["", "a", "b"]
    kind.select_by_value("crowding_end")  # no rule of that kind: nothing listed
    poll(lambda: not driver.find_elements(By.CSS_SELECTOR, item), 5, "the filtered list")
    kind.select_by_value("enter")
    camera.select_by_value("a")
    poll(lambda: driver.find_elements(By.CSS_SELECTOR, item), 5, "the event back")
    listed = driver.find_elements(By.CSS_SELECTOR, "#event-list li")
    assert {li.get_attribute("data-kind") for li in listed} == {"enter"}
    kind.select_by_value("")
    camera.select_by_value("")


def test_live_grid_and_drawing_a_zone_in_the_page(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    port = free_port()
    path = console_pipeline(tmp_path, redis_server.url, port)
    with browser() as driver:
        proc = serve(None, path=path, http_port=port, env={"CONSOLE_TOKEN": TOKEN})
        proc.wait_for(
            lambda: all(proc.camera(c).get("state") == "streaming" for c in "ab"), 120, "streaming"
        )
        driver.get(f"http://127.0.0.1:{port}/")

        def streaming() -> bool:
            tiles = driver.find_elements(By.CSS_SELECTOR, "article.tile")
            states = {t.get_attribute("data-camera"): t.get_attribute("data-state") for t in tiles}
            return states == {"a": "streaming", "b": "streaming"}

        poll(streaming, 15, "both tiles streaming")
        first = {c: poll(lambda c=c: driver.execute_script(PIXELS_JS, c), 15, f"{c} frame")
                 for c in "ab"}  # fmt: skip
        for cam, (w, h, _data) in first.items():
            assert (w, h) == (160, 120), cam
        # The live frames move on.
        poll(lambda: driver.execute_script(PIXELS_JS, "a")[2] != first["a"][2], 10, "a new frame")
        assert TOKEN not in driver.page_source
        screenshot(driver, "live-grid")
        check_overlay_on_masks(driver, redis_server)

        # Draw a zone over camera a's frame in the page, without the token: refused.
        original = path.read_text()
        driver.find_element(By.CSS_SELECTOR, 'article[data-camera="a"] .draw-btn').click()
        canvas = driver.find_element(By.CSS_SELECTOR, 'article[data-camera="a"] canvas.draw')
        size = canvas.size
        dx, dy = size["width"] * 0.46, size["height"] * 0.46
        for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            ActionChains(driver).move_to_element_with_offset(
                canvas, int(sx * dx), int(sy * dy)
            ).click().perform()
        assert driver.find_element(By.ID, "editor-points").text == "4 points"
        name = driver.find_element(By.ID, "editor-name")
        name.clear()
        name.send_keys("drawn")
        driver.find_element(By.ID, "editor-save").click()
        result = driver.find_element(By.ID, "editor-result")
        poll(lambda: result.text.startswith("401"), 10, "the refusal")
        assert path.read_text() == original
        screenshot(driver, "zone-refused-without-token")

        # With the token: saved, in pipeline.yaml, and counting without a restart.
        token = driver.find_element(By.ID, "token")
        token.send_keys(TOKEN)
        driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", token)
        driver.find_element(By.ID, "editor-save").click()
        poll(lambda: result.text == "saved", 10, f"saved (page says {result.text!r})")
        zone = yaml.safe_load(path.read_text())["alerts"]["cameras"]["a"]["zones"]["drawn"]
        xs, ys = [p[0] for p in zone["polygon"]], [p[1] for p in zone["polygon"]]
        assert min(xs) <= 10 and max(xs) >= 150 and min(ys) <= 10 and max(ys) >= 110, zone
        client = redis_server.client()

        def alerted() -> bool:
            entries = client.xrange("streamseg:alerts")
            return any(json.loads(f[b"data"])["rule"] == "drawn-rule" for _i, f in entries)

        proc.wait_for(alerted, 30, "an alert of the drawn zone's rule")
        seen_in_redis = time.monotonic()
        screenshot(driver, "zone-saved")

        # The timeline lists it within a second; its snapshot shows the zone.
        item = 'li[data-rule="drawn-rule"]'
        poll(lambda: driver.find_elements(By.CSS_SELECTOR, item), 5, "the event in the timeline")
        assert time.monotonic() - seen_in_redis <= 1.0
        driver.find_elements(By.CSS_SELECTOR, item)[-1].click()
        snap = driver.find_element(By.ID, "event-snapshot")
        poll(
            lambda: driver.execute_script("return arguments[0].naturalWidth", snap), 10, "snapshot"
        )
        pixels = driver.execute_script(SNAPSHOT_JS, snap)
        yellow = sum(
            1
            for i in range(0, len(pixels), 4)
            if pixels[i] > 200 and pixels[i + 1] > 170 and pixels[i + 2] < 80
        )
        assert yellow >= 100, "the zone's outline is not on the snapshot"
        why = json.loads(driver.find_element(By.ID, "event-why").text)
        assert why["rule"]["zone"] == "drawn" and why["zone"] == "drawn"
        assert not driver.find_element(By.ID, "event-clip").is_displayed()  # record.clips off
        screenshot(driver, "event-snapshot")
        check_events_panel(driver, item)

        # Health: both cameras with their fps charts, the sinks and the model.
        spark = '#health-rows tr[data-camera="{}"] polyline'
        poll(lambda: all(driver.find_elements(By.CSS_SELECTOR, spark.format(c)) for c in "ab"),
             10, "health charts")  # fmt: skip
        model_line = driver.find_element(By.ID, "model-line").text
        assert "maskrcnn_small" in model_line and "no hot swap yet" in model_line
        assert "redis connected" in driver.find_element(By.ID, "sinks-line").text
        driver.execute_script("document.getElementById('health').scrollIntoView()")
        screenshot(driver, "health")
        assert proc.camera("b")["state"] == "streaming"
        assert proc.terminate() == 0, proc.tail()


def test_live_overlay_lies_on_the_ground_truth(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    """With the trained demo model, the track colours the browser shows sit on the
    synthetic scene's exact masks of the frame they are drawn on (a frame's overlay
    drawn on another frame would miss the moving objects)."""
    from scipy.ndimage import binary_dilation

    from streamseg.console.overlay import track_color
    from streamseg.synthetic.scene import SyntheticScene

    url = "synthetic://?seed=1001&width=320&height=240&fps=8&objects=4"
    port = free_port()
    path = console_pipeline(tmp_path, redis_server.url, port)
    cfg = yaml.safe_load(path.read_text())
    cfg["cameras"] = [{"id": "a", "url": url}]
    cfg["alerts"] = {"cameras": {}}
    cfg["tracking"] = {"enabled": True}
    cfg["model"].update(weights=str(DEMO), min_size=240, max_size=320, score_threshold=0.5)
    cfg["model"].pop("missing_weights")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    scene = SyntheticScene.from_url(url)
    with browser() as driver:
        proc = serve(None, path=path, http_port=port, env={"CONSOLE_TOKEN": TOKEN})
        proc.wait_for(lambda: proc.camera("a").get("state") == "streaming", 120, "streaming")
        driver.get(f"http://127.0.0.1:{port}/")
        poll(lambda: driver.execute_script(PIXELS_JS, "a"), 15, "a live frame")
        on_truth = coloured = 0
        for _attempt in range(8):
            seq, w, h, data = driver.execute_async_script(FRAME_JS)
            assert (w, h) == (320, 240)
            pixels = np.asarray(data, np.uint8).reshape(h, w, 4)[..., :3]
            gt = scene.frame(seq).gt
            assert gt.masks is not None
            # The objects' pixels, give or take the outline's width.
            objects = binary_dilation(gt.frame_masks().any(0).numpy(), iterations=2)
            for tid in range(1, 200):
                on_colour = np.all(pixels == np.asarray(track_color(tid), np.uint8), axis=-1)
                coloured += int(on_colour.sum())
                on_truth += int((on_colour & objects).sum())
            if coloured >= 200:
                break
        screenshot(driver, "live-ground-truth")
    assert coloured >= 200, "too few track-coloured pixels in eight frames"
    assert on_truth >= 0.9 * coloured, f"{on_truth} of {coloured} coloured pixels on the objects"
