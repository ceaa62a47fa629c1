"""Passwords (RTSP camera, Redis) never appear in logs, /readyz, /metrics, traces or Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.rtsp import RtspServer
from tests.support.serve import FAST_RECONNECT, ServeProcess, service_pipeline
from tests.support.servers import RedisServer

pytestmark = [pytest.mark.rtsp, pytest.mark.slow]

CAM_PW, WRONG_PW, REDIS_PW = "camPW-7f3a9", "wrongPW-0d1b", "redisPW-51c2e"


def redis_dump(client) -> str:  # type: ignore[no-untyped-def]
    """Every key and every stream entry in Redis, as text."""
    out = []
    for key in client.scan_iter():
        out.append(key.decode())
        if client.type(key) == b"stream":
            out += [repr(fields) for _id, fields in client.xrange(key)]
    return "\n".join(out)


def test_no_secret_anywhere(
    serve: Callable[..., ServeProcess],
    rtsp_server_factory: Callable[..., RtspServer],
    tmp_path: Path,
) -> None:
    cam = rtsp_server_factory(user="viewer", password=CAM_PW)
    redis = RedisServer(tmp_path, password=REDIS_PW)
    redis.start()
    try:
        base = f"rtsp://viewer:%s@127.0.0.1:{cam.port}/stream"
        cams = [
            {"id": "door", "url": base % "${CAM_PASSWORD}", "reconnect": FAST_RECONNECT},
            {"id": "wrong", "url": base % "${CAM_WRONG}", "reconnect": FAST_RECONNECT},
        ]
        config = service_pipeline(
            cams,
            {"url": f"redis://127.0.0.1:{redis.port}/0", "password": "${REDIS_PASSWORD}"},
            telemetry={"metrics": "prometheus", "traces": "console"},  # spans on stderr
        )
        env = {"CAM_PASSWORD": CAM_PW, "CAM_WRONG": WRONG_PW, "REDIS_PASSWORD": REDIS_PW}
        proc = serve(config, env=env, args=("--log-level", "DEBUG"))
        client = redis.client()
        proc.wait_for(lambda: client.xlen("streamseg:detections:door") >= 3, 90, "door publishes")
        proc.wait_for(lambda: proc.camera("wrong").get("reconnects", 0) >= 1, 20, "wrong retries")
        # An outage, so Redis errors are logged too.
        redis.stop()
        proc.wait_for(
            lambda: proc.readyz()["sinks"]["redis"]["connected"] is False, 15, "Redis down"
        )
        redis.start()
        proc.wait_for(
            lambda: proc.readyz()["sinks"]["redis"]["connected"] is True, 15, "Redis back"
        )
        ready = proc.get("/readyz")[1]
        metrics = proc.get("/metrics")[1]
        wrong_error = proc.camera("wrong").get("last_error") or ""
        assert proc.terminate() == 0, proc.tail()
        stored = redis_dump(redis.client())
    finally:
        redis.stop()
    log = proc.log
    # The checks below can fail: the URLs, errors and spans really are there.
    assert f"viewer:***@127.0.0.1:{cam.port}" in log
    assert "401" in wrong_error or "unauthorized" in wrong_error.lower()
    assert "redis: unavailable" in log
    assert '"name": "segment"' in log  # console spans were written
    assert "streamseg_publish_errors_total{" in metrics  # the outage's errors are exported
    assert "streamseg:detections:door" in stored
    for secret in (CAM_PW, WRONG_PW, REDIS_PW):
        for where, text in (("log", log), ("/readyz", ready), ("/metrics", metrics)):
            assert secret not in text, f"{secret} leaked into {where}"
        assert secret not in stored, f"{secret} leaked into Redis"
