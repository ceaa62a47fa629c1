"""What one worker's console sees of the fleet (``FleetView``), against a real Redis:
the other workers' cameras with the owner's console address from its heartbeat,
and the alerts the other workers published (not its own)."""

from __future__ import annotations

import json
import time

from streamseg.fleet.config import FleetConfig
from streamseg.fleet.store import FleetStore
from streamseg.fleet.view import FleetView
from streamseg.fleet.worker import FleetWorker
from streamseg.ingest.config import CameraConfig
from streamseg.publish.redis_config import RedisConfig
from tests.fleet.test_worker import Host
from tests.support.servers import RedisServer
from tests.support.waiting import poll

CAMERAS = [CameraConfig(id=f"cam{i}", url=f"rtsp://user:secret@127.0.0.1:1/{i}") for i in range(2)]


def test_the_view_names_each_cameras_owner_and_its_console(redis_server: RedisServer) -> None:
    owner = FleetWorker(
        config=FleetConfig(name="w0", capacity=4, lease_s=2),
        redis=RedisConfig(url=redis_server.url),
        host=Host(),
        seeds=CAMERAS,
    )
    owner.advertise("http://10.0.0.7:8080")
    store = FleetStore(redis_server.client(), prefix="streamseg")
    other = FleetView(store=store, name="w1", held=dict, prefix="streamseg", cache_s=0.1)
    try:
        owner.start()
        poll(lambda: set(owner.held()) == {"cam0", "cam1"}, 10, "w0 holds both cameras")
        time.sleep(0.15)  # past the view's cache
        rows = other.cameras()
        assert set(rows) == {"cam0", "cam1"}
        for cid, row in rows.items():
            assert row["owner"] == "w0" and row["console"] == "http://10.0.0.7:8080", row
            assert "secret" not in row["url"], row  # redacted
            assert other.console_of(cid) == "http://10.0.0.7:8080"
        assert other.worker_console("w0") == "http://10.0.0.7:8080"
        assert other.worker_console("w9") is None
        assert store.snapshot()["workers"]["w0"]["console"] == "http://10.0.0.7:8080"
        # The owner's own view lists none of its cameras as another's.
        assert owner.view.cameras() == {} and owner.view.console_of("cam0") is None
    finally:
        owner.close()


def test_the_view_lists_only_the_other_workers_alerts(redis_server: RedisServer) -> None:
    client = redis_server.client()
    for worker, rule in (("w0", "r0"), ("w1", "r1"), (None, "r2"), ("w0", "r3")):
        body = {"type": "alert", "rule": rule, "kind": "enter", "camera_id": "cam0", "time": 1.0}
        if worker is not None:
            body["worker"] = worker
        client.xadd("streamseg:alerts", {"data": json.dumps(body)})
    client.xadd("streamseg:alerts", {"data": b"not json"})
    view = FleetView(store=FleetStore(client, prefix="streamseg"), name="w1", held=dict,
                     prefix="streamseg")  # fmt: skip
    assert [m["rule"] for m in view.alerts()] == ["r3", "r0"]  # newest first, w0's only
