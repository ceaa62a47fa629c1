"""The console over real HTTP against a real ``serve`` (synthetic cameras, real redis-server).

One service: the live frames with overlays, the token rules, and rule
changes through the API taking effect without a restart and landing in
pipeline.yaml with its comments kept; bad changes refused with the field
named and nothing changed.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from streamseg.runtime.hotswap import request_swap
from tests.support.console import TOKEN, call, console_pipeline, fields
from tests.support.serve import REPO, ServeProcess
from tests.support.servers import RedisServer, free_port

pytestmark = pytest.mark.slow

ALERT_SCHEMA = REPO / "streamseg/schemas/alert.schema.json"
DEMO = REPO / "models" / "demo_small.pth"


def _serving(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> tuple[ServeProcess, int, Path]:
    """``serve`` on the console pipeline (cameras a and b), once both stream; with its
    HTTP port and its pipeline.yaml."""
    port = free_port()
    path = console_pipeline(tmp_path, redis_server.url, port)
    proc = serve(None, path=path, http_port=port, env={"CONSOLE_TOKEN": TOKEN})
    proc.wait_for(
        lambda: all(proc.camera(c).get("state") == "streaming" for c in "ab"), 120, "both stream"
    )
    return proc, port, path


def test_console_live_view_token_and_live_rule_changes(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    from PIL import Image

    proc, port, path = _serving(serve, redis_server, tmp_path)
    # The probes answer as before, without a token.
    assert proc.get("/healthz")[0] == 200
    assert proc.readyz()["http_status"] == 200
    assert proc.get("/metrics")[0] == 200

    # The page and the camera list (reads on loopback need no token).
    code, page = call(port, "GET", "/")
    assert code == 200 and b"streamseg" in page and b"/static/console.js" in page
    assert call(port, "GET", "/static/console.js")[0] == 200
    code, cams = call(port, "GET", "/api/cameras")
    assert code == 200 and set(cams["cameras"]) == {"a", "b"}
    assert cams["cameras"]["a"]["state"] == "streaming"

    # Health: every camera with its recent history, the sinks and the model.
    def history() -> Any:  # samples every 0.5 s here; a point with frames processed
        health = call(port, "GET", "/api/health")[1]
        fps = health["fields"].index("fps")
        return health if any((p[fps] or 0) > 0 for p in health["cameras"]["a"]["history"]) else None

    health = proc.wait_for(history, 20, "health samples with frames")

    # One frame rate (streamseg.runtime.rates): the tile, the chart and the status line
    # show the same figure, never above the cameras' 8 fps (a badge once read 8.4 on a
    # 5 fps camera whose frames were segmented two at a time).
    def one_rate() -> Any:
        tile = call(port, "GET", "/api/cameras")[1]["cameras"]["a"]["fps"]
        health = call(port, "GET", "/api/health")[1]
        chart = health["cameras"]["a"]["history"][-1][health["fields"].index("fps")]
        status = re.findall(r"status: a (\d+\.\d) fps", proc.log)
        if not (tile and chart and status and abs(tile - chart) <= 0.05 * tile):
            return None
        return tile, chart, float(status[-1])

    tile, chart, status = proc.wait_for(one_rate, 30, "the tile's fps in the chart and the log")
    assert all(0 < f <= 8.4 for f in (tile, chart, status)), (tile, chart, status)
    assert abs(status - tile) <= 0.15 * tile, (tile, chart, status)
    assert health["sinks"]["redis"]["connected"] is True
    assert health["model"]["arch"] == "maskrcnn_small" and health["model"]["loaded"] is True

    # A live frame with overlays: a JPEG of the camera's size.
    code, jpeg = call(port, "GET", "/api/cameras/a/frame.jpg")
    assert code == 200 and jpeg[:2] == b"\xff\xd8"
    assert Image.open(io.BytesIO(jpeg)).size == (160, 120)
    assert call(port, "GET", "/api/cameras/zz/frame.jpg")[0] == 404

    original = path.read_text()
    zone = {"name": "all", "polygon": [[0, 0], [160, 0], [160, 120], [0, 120]]}
    # Without the token, or with a wrong one, writes are refused and nothing changes.
    assert call(port, "POST", "/api/cameras/a/zones", zone)[0] == 401
    assert call(port, "POST", "/api/cameras/a/zones", zone, token="wrong")[0] == 403
    assert call(port, "DELETE", "/api/cameras/b/zones/left")[0] == 401
    assert path.read_text() == original
    assert call(port, "GET", "/api/cameras/a/alerts")[1]["zones"] == {}

    # Bad changes: refused with the field named, file and running rules untouched.
    bad: list[tuple[str, str, Any, int, str]] = [
        ("POST", "/api/cameras/a/zones", {"name": "z", "polygon": [[0, 0], [10, 10]]}, 422,
         "alerts.cameras.a.zones.z.polygon"),
        ("POST", "/api/cameras/a/zones", {"name": "z", "polygon": [[0, 0], [50, 50], [50, 0],
         [0, 50]]}, 422, "alerts.cameras.a.zones.z.polygon"),  # crosses itself
        ("POST", "/api/cameras/a/zones", {"name": "z", "polygon": [[0, 0], [500, 0], [500, 90]]},
         422, "alerts.cameras.a.zones.z.polygon[1]"),  # off the 160x120 frame
        ("POST", "/api/cameras/nope/zones", zone, 404, "camera"),
        ("POST", "/api/cameras/b/zones", {"name": "left", "polygon": [[0, 0], [9, 0], [9, 9]]}, 409,
         "alerts.cameras.b.zones.left"),
        ("POST", "/api/cameras/a/rules", {"name": "r", "type": "zone", "zone": "missing"}, 422,
         "alerts.cameras.a"),
        ("POST", "/api/cameras/a/rules", {"name": "r", "type": "teleport"}, 422,
         "alerts.cameras.a.rules[0]"),
    ]  # fmt: skip
    for method, url, body, status, field in bad:
        code, reply = call(port, method, url, body, token=TOKEN)
        assert code == status, (url, body, reply)
        assert any(f and f.startswith(field) for f in fields(reply)), (field, reply)
    code, reply = call(port, "POST", "/api/cameras/a/zones", raw=b"{nope", token=TOKEN)
    assert code == 400 and fields(reply) == ["body"]
    # aiohttp's own refusal of an oversized body is JSON of the same shape.
    code, reply = call(port, "POST", "/api/cameras/a/zones", raw=b"x" * (2 << 20), token=TOKEN)
    assert code == 413 and fields(reply) == ["body"] and "too large" in reply["error"], reply
    bow = {"name": "z", "polygon": [[0, 0], [50, 50], [50, 0], [0, 50]]}
    code, reply = call(port, "POST", "/api/cameras/a/zones", bow, token=TOKEN)
    assert code == 422 and "crosses itself" in json.dumps(reply), reply  # not "has no area"
    assert path.read_text() == original

    # A zone over the whole frame of camera a and a zone rule: alerts reach Redis, no restart.
    assert call(port, "POST", "/api/cameras/a/zones", zone, token=TOKEN)[0] == 201
    rule = {"name": "in-all", "type": "zone", "zone": "all"}
    code, section = call(port, "POST", "/api/cameras/a/rules", rule, token=TOKEN)
    assert code == 201 and section["rules"][0]["name"] == "in-all"
    client = redis_server.client()

    def alerts() -> list[dict[str, Any]]:
        entries = client.xrange("streamseg:alerts")
        return [json.loads(f[b"data"]) for _id, f in entries]

    proc.wait_for(
        lambda: any(a["rule"] == "in-all" for a in alerts()), 60, "an alert of the new rule"
    )
    # The events timeline has it, with the rule's parameters and a snapshot.
    code, listed = call(port, "GET", "/api/events?rule=in-all&camera=a")
    assert code == 200 and listed["events"], listed
    ev = listed["events"][0]
    assert ev["rule_config"]["zone"] == "all" and ev["zone"] == "all"
    assert call(port, "GET", "/api/events?rule=in-all&camera=b")[1]["events"] == []
    assert call(port, "GET", "/api/events?since=soon")[0] == 400
    snap: Any = None
    for _ in range(50):
        code, snap = call(port, "GET", ev["snapshot"])
        if code == 200:
            break
        time.sleep(0.1)
    assert code == 200 and snap[:2] == b"\xff\xd8"
    # The alert on Redis names its snapshot file (valid by the published schema),
    # and that file is there a moment later.
    published = [a for a in alerts() if a["rule"] == "in-all"]
    jsonschema.validate(published[0], json.loads(ALERT_SCHEMA.read_text()))
    # (null where 32 snapshots already waited to be written: a loaded machine)
    files = [Path(a["snapshot"]) for a in published if a["snapshot"] is not None]
    assert files, published
    assert all(f.is_absolute() and f.suffix == ".jpg" for f in files), files
    assert ev["snapshot_path"] in {str(f) for f in files}
    proc.wait_for(lambda: files[0].is_file(), 5, f"the snapshot file {files[0]}")
    assert files[0].read_bytes()[:2] == b"\xff\xd8"
    saved = path.read_text()
    assert saved.startswith("# the console test's pipeline: this comment must survive changes")
    on_disk = yaml.safe_load(saved)["alerts"]["cameras"]
    assert on_disk["a"]["zones"]["all"]["polygon"] == zone["polygon"]
    assert on_disk["a"]["rules"] == [rule]
    assert on_disk["b"]["zones"]["left"]  # the other camera's section is kept
    assert "${CONSOLE_TOKEN}" in saved  # environment references stay references
    assert TOKEN not in saved

    # Deleting the zone while a rule uses it is refused, naming the rule.
    code, reply = call(port, "DELETE", "/api/cameras/a/zones/all", token=TOKEN)
    assert code == 422 and "in-all" in json.dumps(reply)
    assert call(port, "DELETE", "/api/cameras/a/rules/in-all", token=TOKEN)[0] == 200
    assert call(port, "DELETE", "/api/cameras/a/zones/all", token=TOKEN)[0] == 200
    assert "a" not in yaml.safe_load(path.read_text())["alerts"]["cameras"]

    # The model panel shows the last hot swap: a failed one, then one that loads.
    assert call(port, "GET", "/api/health")[1]["model"]["last_swap"] is None
    for weights, ok in [(tmp_path / "missing.pth", False), (DEMO, True)]:
        request_swap(client, "streamseg", str(weights))

        def swapped(weights: Path = weights) -> Any:
            last = call(port, "GET", "/api/health")[1]["model"]["last_swap"]
            return last if last is not None and last["weights"] == str(weights) else None

        last = proc.wait_for(swapped, 30, f"the swap to {weights.name} in /api/health")
        assert last["ok"] is ok and last["source"] == "redis" and last["time"] > time.time() - 60
        assert (last["error"] is None) is ok and (ok or "missing.pth" in last["error"]), last
    assert call(port, "GET", "/api/health")[1]["model"]["weights"] == str(DEMO)  # runs now

    # Both cameras kept streaming through every change; the token never reached a page or the log.
    for cid in "ab":
        assert proc.camera(cid)["state"] == "streaming"
    assert TOKEN not in json.dumps(call(port, "GET", "/api/cameras")[1])
    assert TOKEN not in proc.log
    assert proc.terminate() == 0, proc.tail()


@pytest.mark.parametrize("token", [TOKEN, None])
def test_on_a_non_loopback_address_reads_need_the_token(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path, token: str | None
) -> None:
    port = free_port()
    path = console_pipeline(tmp_path, redis_server.url, port)
    text = path.read_text().replace("host: 127.0.0.1", "host: 0.0.0.0")
    path.write_text(text if token else text.replace("${CONSOLE_TOKEN}", "''"))
    proc = serve(None, path=path, http_port=port, env={"CONSOLE_TOKEN": TOKEN})
    proc.wait_for(lambda: proc.camera("a").get("state") == "streaming", 120, "a streams")
    # Probes and scrapes stay open.
    assert proc.get("/healthz")[0] == 200 and proc.get("/metrics")[0] == 200
    if token is None:  # no token on a public address: the console is off
        for url in ("/", "/api/cameras", "/api/cameras/a/frame.jpg"):
            code, reply = call(port, "GET", url)
            assert code == 403 and "http.token" in reply["error"], url
        return
    for url in ("/", "/static/console.js", "/api/cameras", "/api/cameras/a/frame.jpg"):
        assert call(port, "GET", url)[0] == 401, url
        assert call(port, "GET", url, token="wrong")[0] == 403, url
        assert call(port, "GET", url, token=TOKEN)[0] == 200, url
    assert call(port, "GET", f"/api/cameras/a/frame.jpg?token={TOKEN}")[0] == 200
    assert proc.terminate() == 0, proc.tail()
