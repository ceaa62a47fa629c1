"""An RTSP camera end to end into Redis, health endpoints, then SIGTERM drains and exits 0."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import jsonschema
import pytest

from streamseg.schemas import load_schema
from tests.support.rtsp import RtspServer
from tests.support.serve import (
    FAST_RECONNECT,
    ServeProcess,
    detections,
    metric,
    service_pipeline,
    summary,
)
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.rtsp, pytest.mark.slow]


def test_rtsp_camera_into_redis_then_sigterm_drains(
    serve: Callable[..., ServeProcess], rtsp_server: RtspServer, redis_server: RedisServer
) -> None:
    cams = [{"id": "gate", "url": rtsp_server.url, "reconnect": FAST_RECONNECT}]
    proc = serve(service_pipeline(cams, {"url": redis_server.url}))
    assert proc.wait_for(lambda: proc.get("/healthz")[0] == 200, 60, "/healthz")
    assert json.loads(proc.get("/healthz")[1]) == {"status": "ok"}
    ready = proc.wait_for(lambda: proc.readyz().get("ready"), 90, "/readyz ready")
    r = proc.readyz()
    assert ready and r["http_status"] == 200
    assert r["model"]["loaded"] and r["model"]["arch"] == "maskrcnn_small"
    assert r["model"]["state"] == "running" and r["model"]["failed_batches"] == 0
    assert r["sinks"]["redis"]["connected"] is True and r["stopping"] is False
    gate = r["cameras"]["gate"]
    assert gate["state"] == "streaming" and gate["live"] is True and gate["reconnects"] == 0

    client = redis_server.client()
    proc.wait_for(lambda: len(detections(client, "gate")) >= 8, 60, "8 detections messages")
    messages = detections(client, "gate")
    validator = jsonschema.Draft202012Validator(load_schema("detections"))
    for msg in messages:
        validator.validate(msg)
        assert msg["camera"] == "gate" and msg["type"] == "detections"
        assert msg["image"] == {"height": 120, "width": 160}
        assert msg["model"]["arch"] == "maskrcnn_small"
        assert msg["capture_time"] <= msg["published_time"]
        for inst in msg["instances"]:
            assert inst["mask"] is None or inst["mask"]["size"] == [120, 160]
            x1, y1, x2, y2 = inst["box"]
            assert 0 <= x1 <= x2 <= 160 and 0 <= y1 <= y2 <= 120
    assert any(m["instances"] for m in messages)  # instances and masks were validated too
    seqs = [m["seq"] for m in messages]
    assert all(a < b for a, b in itertools.pairwise(seqs))  # in order, no repeats
    pts = [m["pts"] for m in messages if m["pts"] is not None]  # the first may have none
    assert len(pts) >= len(messages) - 1
    assert all(a < b for a, b in itertools.pairwise(pts))

    code, text = proc.get("/metrics")
    assert code == 200
    assert (metric(text, "streamseg_frames_read_total", camera="gate") or 0) >= 8
    assert (metric(text, "streamseg_messages_published_total", type="detections") or 0) >= 8
    assert metric(text, "streamseg_ingest_health", camera="gate", state="streaming") == 1

    assert proc.terminate(timeout=40) == 0, proc.tail()
    log = proc.log
    assert "SIGTERM received" in log and "draining" in log
    assert "Traceback" not in log
    counts = summary(log, "gate")
    # Every frame read was either published or counted as skipped or lost, and the
    # published ones are all in Redis: nothing in flight was lost at exit.
    assert counts["read"] == counts["published"] + counts["skipped"] + counts["lost"]
    assert counts["segmented"] == counts["published"]
    assert client.xlen("streamseg:detections:gate") == counts["published"]
