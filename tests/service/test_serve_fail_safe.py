"""Live changes that fail safe, through the console's API of a real ``serve``.

One service (cameras a and b, the console, a real redis-server) started by
``tests.support.faults``, which makes chosen cameras fail to open or to
start and one chosen rule raise on every frame, where no validation can see
it coming. Every refused or failed change answers 4xx JSON naming the field,
and leaves the running cameras and rules, and pipeline.yaml, as they were;
a rule that fails at run time is disabled and reported (log, ``/readyz``,
metric, the console's health) while the camera's other rules go on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.console import TOKEN, call, console_pipeline, fields
from tests.support.serve import ServeProcess, metric_sum, service_pipeline
from tests.support.servers import RedisServer, free_port

pytestmark = pytest.mark.slow

# See tests/support/faults.py: URLs with these parameters fail to open / to start.
FAULTS = {"open": "seed=91", "start": "seed=92", "rule": "explode"}
SCENE = "synthetic://?width=160&height=120&fps=8&objects=3&seed="
FULL = {"polygon": [[0, 0], [160, 0], [160, 120], [0, 120]]}


def _serving(
    serve: Callable[..., ServeProcess], redis: RedisServer, tmp_path: Path
) -> tuple[ServeProcess, Path]:
    port = free_port()
    path = console_pipeline(tmp_path, redis.url, port)
    command = [sys.executable, "-m", "tests.support.faults", "serve", str(path), "--no-status",
               "--log-level", "INFO"]  # fmt: skip
    env = {"CONSOLE_TOKEN": TOKEN, "STREAMSEG_TEST_FAULTS": json.dumps(FAULTS)}
    proc = serve(None, path=path, http_port=port, env=env, command=command)
    proc.wait_for(lambda: all(_streams(proc, c) for c in "ab"), 120, "a and b stream")
    return proc, path


def _streams(proc: ServeProcess, camera: str) -> bool:
    return bool(proc.camera(camera).get("state") == "streaming")


def _url(proc: ServeProcess, camera: str) -> str:
    return str(call(proc.http_port, "GET", "/api/cameras")[1]["cameras"][camera]["url"])


def test_refused_and_failed_changes_leave_everything_as_it_was(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    proc, path = _serving(serve, redis_server, tmp_path)
    port, original = proc.http_port, path.read_text()
    b_url = _url(proc, "b")

    def refused(method: str, route: str, body: Any, status: int, field: str) -> dict[str, Any]:
        code, reply = call(port, method, route, body, token=TOKEN)
        assert code == status and isinstance(reply, dict), (route, code, reply, proc.tail(30))
        assert any(f.startswith(field) for f in fields(reply)), reply
        assert path.read_text() == original
        return reply

    # Rules naming a class the model does not have: refused before they run (item 1).
    zone = {"name": "all", **FULL}
    assert call(port, "POST", "/api/cameras/a/zones", zone, token=TOKEN)[0] == 201
    original = path.read_text()
    lava = {"name": "wet", "type": "coverage", "zone": "all", "region": "lava", "above": 0.1}
    reply = refused("POST", "/api/cameras/a/rules", lava, 422, "alerts.cameras.a.rules[0].region")
    assert "unknown class 'lava' in `region`" in json.dumps(reply)
    zebra = {"name": "z", "type": "zone", "zone": "all", "classes": ["zebra"]}
    refused("POST", "/api/cameras/a/rules", zebra, 422, "alerts.cameras.a.rules[0].classes")
    assert call(port, "GET", "/api/cameras/a/alerts")[1]["rules"] == []

    # A bad camera URL on POST: a 422 naming the parameter (item 3), not a 500.
    bad = {"id": "c", "url": "synthetic://?seed=abc&width=-5"}
    reply = refused("POST", "/api/cameras", bad, 422, "cameras[2].url")
    assert "seed='abc' must be an integer" in json.dumps(reply)
    assert "c" not in call(port, "GET", "/api/cameras")[1]["cameras"]

    # A bad parameter on PUT (item 2): refused, b streams on as it was.
    reply = refused("PUT", "/api/cameras/b", {"url": SCENE + "2&fps=banana"}, 422, "cameras[1].url")
    assert "fps" in json.dumps(reply)
    assert _streams(proc, "b") and _url(proc, "b") == b_url

    # Valid, but the new source fails to open: nothing was touched.
    refused("PUT", "/api/cameras/b", {"url": SCENE + "91"}, 422, "cameras[1].url")
    assert _streams(proc, "b") and _url(proc, "b") == b_url
    # Valid and opened, but it cannot be started: b was stopped, and is back.
    refused("PUT", "/api/cameras/b", {"url": SCENE + "92"}, 409, "cameras")
    proc.wait_for(lambda: _streams(proc, "b"), 30, "b streaming again after the failed change")
    assert _url(proc, "b") == b_url and "b" in proc.readyz()["cameras"]
    assert "back to the old one" in proc.log

    # b is reachable as ever: changed (the same URL works now), then removed.
    code, reply = call(port, "PUT", "/api/cameras/b", {"url": SCENE + "92"}, token=TOKEN)
    assert code == 200 and reply["url"].endswith("seed=92"), reply
    proc.wait_for(lambda: _streams(proc, "b") and _url(proc, "b").endswith("92"), 30, "new b")
    assert "seed=92" in path.read_text()
    assert call(port, "DELETE", "/api/cameras/b", token=TOKEN)[0] == 200
    assert "b" not in call(port, "GET", "/api/cameras")[1]["cameras"]
    assert proc.readyz()["status"] == "ok"


def test_a_rule_failing_at_run_time_is_disabled_and_the_others_go_on(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    proc, _path = _serving(serve, redis_server, tmp_path)
    port, client = proc.http_port, redis_server.client()
    # Both rules in one change: each change of a's rules gives "explode" a new start.
    rules = [{"name": n, "type": "zone", "zone": "all"} for n in ("explode", "fine")]
    section = {"zones": {"all": FULL}, "rules": rules}
    assert call(port, "PUT", "/api/cameras/a/alerts", section, token=TOKEN)[0] == 200

    def degraded() -> Any:
        ready = proc.readyz()
        return ready if ready.get("status") == "degraded" else None

    ready = proc.wait_for(degraded, 30, "/readyz saying degraded")
    assert ready["http_status"] == 200 and ready["ready"] is True  # the rest still serves
    assert list(ready["degraded"]["rules"]) == ["a"]
    assert "injected fault" in ready["degraded"]["rules"]["a"]["explode"]
    start = len(client.xrange("streamseg:alerts"))

    def fine_alerts() -> list[dict[str, Any]]:
        entries = client.xrange("streamseg:alerts")[start:]
        return [a for _i, f in entries if (a := json.loads(f[b"data"]))["rule"] == "fine"]

    proc.wait_for(fine_alerts, 60, "alerts of the other rule after the failure")
    health = call(port, "GET", "/api/health")[1]
    assert "explode" in health["degraded"]["rules"]["a"]
    assert metric_sum(proc.get("/metrics")[1], "streamseg_track_rules_failures_total",
                      camera="a", rule="explode") == 1  # fmt: skip
    assert "rule 'explode' failed and is disabled" in proc.log
    # Removing (or changing) the rule ends the degraded state.
    assert call(port, "DELETE", "/api/cameras/a/rules/explode", token=TOKEN)[0] == 200
    proc.wait_for(lambda: proc.readyz().get("status") == "ok", 20, "/readyz ok again")


def test_serve_exits_2_for_a_rule_naming_an_unknown_region_class(
    serve: Callable[..., ServeProcess], redis_server: RedisServer
) -> None:
    rule = {"name": "wet", "type": "coverage", "zone": "all", "region": "lava", "above": 0.1}
    alerts = {"cameras": {"a": {"zones": {"all": FULL}, "rules": [rule]}}}
    cams = [{"id": "a", "url": SCENE + "1"}]
    proc = serve(service_pipeline(cams, {"url": redis_server.url}, alerts=alerts))
    assert proc.wait(120) == 2
    assert "alerts.cameras.a.rules[0].region: rule 'wet': unknown class 'lava'" in proc.log
