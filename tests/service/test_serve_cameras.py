"""Cameras that fail: an RTSP server killed and restarted mid-stream, a camera that
never answers; the service reconnects, counts it, and the other cameras go on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.rtsp import RtspServer
from tests.support.serve import FAST_RECONNECT, ServeProcess, detections, metric, service_pipeline
from tests.support.servers import RedisServer, free_port

pytestmark = [pytest.mark.rtsp, pytest.mark.slow]

LOST = ("backing_off", "connecting", "stalled")


def test_server_restart_reconnects_and_a_dead_camera_disturbs_nobody(
    serve: Callable[..., ServeProcess],
    rtsp_server_factory: Callable[..., RtspServer],
    redis_server: RedisServer,
) -> None:
    good, flaky = rtsp_server_factory(fps=10), rtsp_server_factory(fps=10)
    dead_url = f"rtsp://127.0.0.1:{free_port()}/stream"  # nothing ever listens there
    cams = [
        {"id": "good", "url": good.url, "reconnect": FAST_RECONNECT},
        {"id": "flaky", "url": flaky.url, "reconnect": FAST_RECONNECT},
        {"id": "dead", "url": dead_url, "reconnect": FAST_RECONNECT},
    ]
    proc = serve(service_pipeline(cams, {"url": redis_server.url}))
    client = redis_server.client()

    def count(cam: str) -> int:
        return int(client.xlen(f"streamseg:detections:{cam}"))

    proc.wait_for(lambda: count("good") >= 3 and count("flaky") >= 3, 90, "both cameras publish")
    r = proc.readyz()
    assert r["http_status"] == 200  # ready: one dead camera does not make the service unready
    dead = r["cameras"]["dead"]
    assert dead["state"] in LOST and dead["reconnects"] >= 1
    assert "refused" in (dead["last_error"] or "").lower()

    # The flaky camera's server dies (SIGKILL, connections reset).
    flaky.kill()
    proc.wait_for(lambda: proc.camera("flaky").get("state") in LOST, 15, "flaky lost")
    proc.wait_for(lambda: proc.camera("flaky").get("reconnects", 0) >= 1, 15, "reconnects")
    # The good camera is unaffected while flaky is away.
    n_good = count("good")
    proc.wait_for(lambda: count("good") >= n_good + 5, 30, "good goes on while flaky is down")
    assert proc.camera("good")["state"] == "streaming"
    assert proc.camera("good")["reconnects"] == 0
    assert proc.readyz()["http_status"] == 200

    # The server comes back on the same port: flaky reconnects and goes on.
    last_seq = detections(client, "flaky")[-1]["seq"]
    flaky.start()
    proc.wait_for(lambda: proc.camera("flaky").get("state") == "streaming", 30, "flaky back")

    def new_frames() -> int:  # sequence numbers go on after a reconnect, they do not restart
        return sum(m["seq"] > last_seq for m in detections(client, "flaky"))

    proc.wait_for(lambda: new_frames() >= 3, 30, "flaky publishes new frames again")
    assert count("dead") == 0

    code, text = proc.get("/metrics")
    assert code == 200
    assert (metric(text, "streamseg_ingest_reconnects_total", camera="flaky") or 0) >= 1
    assert (metric(text, "streamseg_ingest_reconnects_total", camera="dead") or 0) >= 1
    assert metric(text, "streamseg_ingest_health", camera="flaky", state="streaming") == 1
    assert metric(text, "streamseg_ingest_health", camera="good", state="streaming") == 1
    assert metric(text, "streamseg_ingest_health", camera="dead", state="streaming") == 0
    assert proc.terminate() == 0, proc.tail()
