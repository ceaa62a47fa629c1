"""Two real ``serve`` workers of one fleet: the camera list lives in Redis, a camera
added or removed through either worker's API reaches the one that serves it, and
``streamseg fleet status`` shows who serves what."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamseg.fleet.store import FleetStore
from tests.support.console import call
from tests.support.rtsp import RtspServer
from tests.support.serve import FAST_RECONNECT, ServeProcess, service_pipeline
from tests.support.servers import RedisServer, free_port

TOKEN = "fleet-test-token"


def _worker(tmp_path: Path, name: str, redis: RedisServer, rtsp: RtspServer) -> ServeProcess:
    cams = [{"id": f"cam{i}", "url": rtsp.url, "reconnect": FAST_RECONNECT} for i in range(2)]
    config = service_pipeline(cams, {"url": redis.url}, tracking={"enabled": False})
    config["fleet"] = {"name": name, "capacity": 4, "lease_s": 3}
    config["http"] = {"host": "127.0.0.1", "port": free_port(), "token": TOKEN}
    folder = tmp_path / name
    folder.mkdir()
    return ServeProcess(config, folder).start()


def _last(redis: RedisServer, camera: str) -> dict[str, Any] | None:
    got = redis.client().xrevrange(f"streamseg:detections:{camera}", count=1)
    return json.loads(got[0][1][b"data"]) if got else None


def test_camera_changes_through_any_worker_reach_its_owner(
    tmp_path: Path, cli, redis_server: RedisServer, rtsp_server_factory
) -> None:  # type: ignore[no-untyped-def]
    rtsp = rtsp_server_factory(fps=4)
    a = _worker(tmp_path, "a", redis_server, rtsp)
    b = _worker(tmp_path, "b", redis_server, rtsp)
    store = FleetStore(redis_server.client(), prefix="streamseg")
    try:
        for w in (a, b):
            w.wait_for(lambda w=w: w.readyz().get("ready"), 300, "ready (model loaded, joined)")
        a.wait_for(lambda: all(_last(redis_server, f"cam{i}") for i in range(2)), 60, "published")

        new = {"id": "cam9", "url": rtsp.url, "reconnect": FAST_RECONNECT}
        code, reply = call(a.http_port, "POST", "/api/cameras", new, token=TOKEN)
        assert code == 201, reply
        owner = a.wait_for(lambda: store.snapshot()["cameras"]["cam9"]["owner"], 20, "cam9 owned")
        a.wait_for(lambda: (_last(redis_server, "cam9") or {}).get("worker") == owner, 30,
                   "cam9 published by its owner")  # fmt: skip
        # Every worker's console lists the whole fleet, with the owner of each camera.
        listed = call(b.http_port, "GET", "/api/cameras", token=TOKEN)[1]["cameras"]
        assert set(listed) >= {"cam0", "cam1", "cam9"}

        status = cli("fleet", "status", str(a.path), "--json")
        assert status.returncode == 0, status.stderr
        snap = json.loads(status.stdout)
        assert set(snap["workers"]) == {"a", "b"}
        assert {c: r["owner"] for c, r in snap["cameras"].items()} == {
            c: store.snapshot()["cameras"][c]["owner"] for c in ("cam0", "cam1", "cam9")
        }
        table = cli("fleet", "status", str(a.path)).stdout
        assert "cam9" in table and "CAPACITY" in table

        code, reply = call(b.http_port, "DELETE", "/api/cameras/cam9", token=TOKEN)
        assert code == 200, reply
        a.wait_for(lambda: "cam9" not in store.snapshot()["cameras"], 10, "cam9 removed")
        a.wait_for(lambda: store.leases(["cam9"]) == {}, 10, "cam9's lease released")
    finally:
        for w in (a, b):
            w.terminate()
