"""Fleet workers against a real Redis, with a host that only records its cameras.

Leases of 2 s keep these quick; every bound is the one the design gives
(``lease_s``, ``guard_s``, one tick), not a guess.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streamseg.bench.tcp_proxy import TcpProxy
from streamseg.fleet.config import FleetConfig
from streamseg.fleet.placement import place
from streamseg.fleet.store import FleetStore
from streamseg.fleet.worker import FleetWorker
from streamseg.ingest.config import CameraConfig
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.sink import Message
from tests.support.servers import RedisServer

LEASE_S = 2.0
CAMERAS = [CameraConfig(id=f"cam{i}", url=f"rtsp://127.0.0.1:1/{i}") for i in range(6)]


class Host:
    """A ``CameraHost`` that records what it was asked to serve."""

    def __init__(self) -> None:
        self.serving: dict[str, CameraConfig] = {}
        self.lock = threading.Lock()

    def start_camera(self, camera: CameraConfig) -> None:
        with self.lock:
            if camera.id in self.serving:
                raise ValueError("already served")
            self.serving[camera.id] = camera

    def stop_camera(self, camera_id: str) -> None:
        with self.lock:
            del self.serving[camera_id]

    def camera_states(self) -> dict[str, str]:
        with self.lock:
            return dict.fromkeys(self.serving, "streaming")


@pytest.fixture
def fleet(redis_server: RedisServer) -> Iterator[Callable[..., tuple[FleetWorker, Host]]]:
    workers: list[FleetWorker] = []

    def make(name: str, *, url: str | None = None, capacity: int = 6) -> tuple[FleetWorker, Host]:
        host = Host()
        worker = FleetWorker(
            config=FleetConfig(name=name, capacity=capacity, lease_s=LEASE_S),
            redis=RedisConfig(url=url or redis_server.url),
            host=host,
            seeds=CAMERAS,
        )
        workers.append(worker.start())
        return worker, host

    yield make
    for w in workers:
        w.close()


def wait(predicate: Callable[[], Any], timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.02)
    return time.monotonic() - t0


def message(camera: str) -> Message:
    return Message("detections", camera, b"{}", published_time=time.time())


def test_two_workers_split_the_seeded_cameras_by_placement(fleet, redis_server) -> None:  # type: ignore[no-untyped-def]
    a, host_a = fleet("a")
    b, host_b = fleet("b")
    expected = place([c.id for c in CAMERAS], {"a": 6, "b": 6})
    mine = {w: {c for c, o in expected.items() if o == w} for w in "ab"}
    wait(lambda: set(host_a.serving) == mine["a"] and set(host_b.serving) == mine["b"], 10, "split")
    assert mine["a"] and mine["b"]
    # The epochs and the fence follow the leases.
    for cid in mine["a"]:
        assert a.admits(message(cid)) and not b.admits(message(cid))
        assert a.stamp(cid) == {"worker": "a", "epoch": a.held()[cid]}
    assert b.stamp(next(iter(mine["a"]))) is None
    status = FleetStore(redis_server.client(), prefix="streamseg").snapshot()
    assert set(status["workers"]) == {"a", "b"}
    assert {c: r["owner"] for c, r in status["cameras"].items()} == expected


def settle(host_a: Host, host_b: Host) -> list[str]:
    """Wait for workers a and b (capacity 6 each) to serve the settled placement; a's share.

    Six cameras served is not enough: while b takes its share, a may still
    serve one of b's, and the two still add up to six.
    """
    settled = place([c.id for c in CAMERAS], {"a": 6, "b": 6})
    mine = sorted(cid for cid, w in settled.items() if w == "a")
    assert mine and len(mine) < 6
    wait(
        lambda: sorted(host_a.serving) == mine and len(host_b.serving) == 6 - len(mine),
        10,
        "the settled placement",
    )
    return mine


def test_a_leaving_worker_hands_over_at_once(fleet) -> None:  # type: ignore[no-untyped-def]
    a, host_a = fleet("a")
    b, host_b = fleet("b")
    moved = set(settle(host_a, host_b))
    epochs = a.held()
    made_by_a = [message(c) for c in moved]  # still in a's sinks when it leaves
    a.close()
    assert not any(a.admits(m) for m in made_by_a)
    took = wait(lambda: set(host_b.serving) == {c.id for c in CAMERAS}, 5, "b takes all")
    assert took < 1.0  # released and announced: no lease to wait out
    assert all(b.held()[c] == epochs[c] + 1 for c in moved)
    # b publishes its own messages of those cameras, never a's older ones.
    assert not any(b.admits(m) for m in made_by_a)
    assert all(b.admits(message(c)) for c in moved)


def test_a_killed_worker_s_cameras_move_once_its_lease_expires(fleet) -> None:  # type: ignore[no-untyped-def]
    a, host_a = fleet("a")
    _b, host_b = fleet("b")
    settle(host_a, host_b)
    a._closed.set()  # its threads stop as a killed process's would: nothing released
    t0 = time.monotonic()
    wait(lambda: len(host_b.serving) == 6, LEASE_S + 3, "b takes all")
    assert time.monotonic() - t0 >= LEASE_S - 1.0  # not before the leases could expire


def test_a_worker_cut_off_from_redis_stops_before_another_takes_over(fleet, redis_server) -> None:  # type: ignore[no-untyped-def]
    proxy = TcpProxy(redis_server.port).start()
    try:
        a, host_a = fleet("a", url=proxy.url)
        b, host_b = fleet("b")
        moved = settle(host_a, host_b)
        proxy.cut()
        both: list[str] = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < LEASE_S + 3 and len(host_b.serving) < 6:
            for cid in moved:  # never admitted by both at once
                if a.admits(message(cid)) and b.admits(message(cid)):
                    both.append(cid)
            time.sleep(0.01)
        assert not both
        assert len(host_b.serving) == 6 and not host_a.serving
        proxy.restore()
        wait(lambda: sorted(host_a.serving) == moved, 10, "a takes its cameras back")
        wait(lambda: len(host_b.serving) == 6 - len(moved), 5, "b lets them go")
    finally:
        proxy.close()


def test_camera_list_changes_reach_the_owner(fleet) -> None:  # type: ignore[no-untyped-def]
    a, host_a = fleet("a")
    b, host_b = fleet("b")
    wait(lambda: len(host_a.serving) + len(host_b.serving) == 6, 10, "all")
    new = CameraConfig(id="extra", url="rtsp://127.0.0.1:1/extra")
    a.add_camera(new)
    with pytest.raises(ValueError, match="already"):
        b.add_camera(new)
    wait(lambda: "extra" in host_a.serving or "extra" in host_b.serving, 5, "added")
    owner = host_a if "extra" in host_a.serving else host_b
    changed = new.model_copy(update={"max_fps": 2.0})
    b.store.put_camera(changed, new=False)
    wait(lambda: owner.serving.get("extra") == changed, 5, "changed")
    (b if owner is host_a else a).remove_camera("extra")
    wait(lambda: "extra" not in owner.serving, 5, "removed")
    with pytest.raises(KeyError):
        a.remove_camera("extra")
