"""A camera whose RTSP server keeps the session open but stops sending: the service
shows it stalled with the reason, counts the stall, and streams again on resume."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.rtsp import RtspServer
from tests.support.serve import ServeProcess, metric, service_pipeline
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.rtsp, pytest.mark.slow]

READ_TIMEOUT = 2.0
# A long first wait after a stall keeps the camera in `stalled` for >= 1.2 s.
RECONNECT = {
    "initial_backoff": 1.5,
    "max_backoff": 2.0,
    "connect_timeout": 3.0,
    "read_timeout": READ_TIMEOUT,
}
READABLE = (
    r"no data for \d+\.\d s \(read timeout 2 s\)",  # the stall itself
    r"cannot open: no video within \d+\.\d s of connecting",  # reopened, still silent
    r"cannot connect: no usable answer within 3 s",  # reopened, handshake unanswered
)


def test_stalled_camera_is_visible_counted_and_recovers(
    serve: Callable[..., ServeProcess], rtsp_server: RtspServer, redis_server: RedisServer
) -> None:
    cams = [{"id": "gate", "url": rtsp_server.url, "reconnect": RECONNECT}]
    proc = serve(service_pipeline(cams, {"url": redis_server.url}), status=True)
    client = redis_server.client()
    stream = "streamseg:detections:gate"
    proc.wait_for(lambda: proc.readyz().get("ready"), 120, "ready")
    proc.wait_for(lambda: client.xlen(stream) >= 3, 60, "3 detections messages")

    rtsp_server.stall()
    t_stall = time.monotonic()
    stalled = proc.wait_for(
        lambda: (c := proc.camera("gate")).get("state") == "stalled" and c,
        READ_TIMEOUT + 10,
        "camera stalled",
    )
    detected_after = time.monotonic() - t_stall
    code, text = proc.get("/metrics")  # scraped while the camera waits in `stalled`
    again = proc.camera("gate")
    assert READ_TIMEOUT - 0.5 <= detected_after <= READ_TIMEOUT + 3.0
    assert re.fullmatch(READABLE[0], stalled["last_error"]), stalled
    assert stalled["stalls"] == 1
    ready = proc.readyz()
    assert ready["http_status"] == 503 and ready["ready"] is False  # its only camera is down
    assert code == 200
    assert metric(text, "streamseg_ingest_stalls_total", camera="gate") == 1
    if again.get("state") == "stalled" and again.get("since") == stalled["since"]:
        assert metric(text, "streamseg_ingest_health", camera="gate", state="stalled") == 1
        assert metric(text, "streamseg_ingest_health", camera="gate", state="streaming") == 0

    # Kept silent: the camera is reopened, and says why each attempt fails.
    seen = watch_camera(proc, "gate", seconds=8)
    assert {s["state"] for s in seen} <= {"stalled", "connecting", "backing_off"}, seen
    assert any(s["state"] != "stalled" for s in seen)  # reconnect attempts were made
    for s in seen:
        assert any(re.match(p, s["last_error"]) for p in READABLE), s["last_error"]
    assert seen[-1]["reconnects"] >= 1

    rtsp_server.resume()
    before = client.xlen(stream)
    proc.wait_for(lambda: proc.camera("gate").get("state") == "streaming", 30, "streaming again")
    proc.wait_for(lambda: client.xlen(stream) >= before + 5, 60, "detections after the stall")
    proc.wait_for(lambda: proc.readyz().get("ready"), 15, "ready again")
    back = proc.camera("gate")
    assert back["stalls"] >= 1 and back["reconnects"] >= 1
    code, text = proc.get("/metrics")
    assert metric(text, "streamseg_ingest_stalls_total", camera="gate") == back["stalls"]
    assert metric(text, "streamseg_ingest_health", camera="gate", state="streaming") == 1

    assert proc.terminate() == 0, proc.tail()
    log = proc.log
    assert re.search(r"ingest\[gate\]: stalled: no data for \d+\.\d s", log)
    # the status line named the camera's state while it was not streaming
    state = r"\[(stalled|connecting|backing_off)\]"
    assert re.search(rf"status: gate \d+\.\d fps skipped \d+ lost \d+ {state}", log)
    assert "Traceback" not in log


def watch_camera(proc: ServeProcess, camera: str, seconds: float) -> list[dict[str, Any]]:
    """Every distinct ``(state, last_error)`` of ``camera`` in ``/readyz`` for ``seconds``."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        cam = proc.camera(camera)
        key = (cam.get("state"), cam.get("last_error"))
        if cam and (not seen or key != (seen[-1]["state"], seen[-1]["last_error"])):
            seen.append(cam)
        time.sleep(0.1)
    return seen
