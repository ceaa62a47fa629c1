"""Redis restarted under a running service: no crash, drops counted, publishing resumes;
stopping while Redis is away still exits, counting what could not be sent."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.serve import ServeProcess, metric, metric_sum, service_pipeline, summary
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow


def test_redis_restart_mid_run(
    serve: Callable[..., ServeProcess], redis_server: RedisServer
) -> None:
    cams = [{"id": "cam", "url": "synthetic://?seed=3&width=160&height=120&fps=10&objects=3"}]
    # A small outage buffer, so a few seconds without Redis overflow it.
    config = service_pipeline(cams, {"url": redis_server.url, "buffer_max_messages": 5})
    config["runtime"]["drain_timeout"] = 3
    proc = serve(config)
    client = redis_server.client()
    stream = "streamseg:detections:cam"
    proc.wait_for(lambda: client.xlen(stream) >= 5, 90, "5 messages")
    assert proc.readyz()["http_status"] == 200

    redis_server.stop()
    proc.wait_for(
        lambda: proc.readyz()["sinks"]["redis"]["connected"] is False, 15, "Redis seen down"
    )
    r = proc.readyz()
    assert r["http_status"] == 503 and r["ready"] is False  # not ready without Redis...
    assert proc.get("/healthz")[0] == 200  # ...but alive
    proc.wait_for(lambda: proc.readyz()["sinks"]["redis"]["lost"] > 0, 30, "buffer overflow drops")
    assert proc.readyz()["sinks"]["redis"]["buffered"] <= 5

    redis_server.start()  # same port, empty (no persistence)
    client = redis_server.client()
    proc.wait_for(lambda: client.xlen(stream) >= 5, 30, "publishing resumes")
    proc.wait_for(lambda: proc.readyz().get("ready"), 15, "ready again")
    redis_state = proc.readyz()["sinks"]["redis"]
    code, text = proc.get("/metrics")
    assert code == 200
    assert (metric(text, "streamseg_messages_lost_total") or 0) > 0
    assert (metric(text, "streamseg_frames_lost_total", camera="cam", reason="redis") or 0) > 0
    assert metric(text, "streamseg_publish_connected") == 1
    # Every failed call is counted, by operation and exception class: the round
    # trip that found Redis gone and each refused reconnect attempt.
    refused = metric(text, "streamseg_publish_errors_total", op="connect", error="ConnectionError")
    assert refused is not None and refused >= 1
    assert (metric(text, "streamseg_publish_errors_total", op="xadd") or 0) >= 1
    assert metric_sum(text, "streamseg_publish_errors_total") == redis_state["errors"]
    assert metric(text, "streamseg_publish_reconnects_total", outcome="ok") == 1
    failed_attempts = metric(text, "streamseg_publish_reconnects_total", outcome="failed")
    assert failed_attempts == metric_sum(text, "streamseg_publish_errors_total", op="connect")
    assert redis_state["reconnects"] == 1
    publish_lines = [line for line in text.splitlines() if line.startswith("streamseg_publish")]
    assert not [line for line in publish_lines if str(redis_server.port) in line]

    # Redis goes away again and stays away: SIGTERM still ends the service
    # (after drain_timeout), and what could not be sent is counted as dropped.
    redis_server.stop()
    proc.wait_for(lambda: proc.readyz()["sinks"]["redis"]["buffered"] > 0, 15, "messages buffered")
    assert proc.terminate() == 0, proc.tail()
    log = proc.log
    assert "redis: unavailable" in log and "redis: reconnected" in log
    assert "could not reach sink redis; lost" in log
    assert "Traceback" not in log
    counts = summary(log, "cam")
    assert counts["lost"] > 0
    # every frame accounted
    assert counts["read"] == counts["published"] + counts["lost"] + counts["skipped"]
