"""The default pipeline.yaml starts as it is (smoke): both cameras publish, ready, clean exit."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.serve import REPO, ServeProcess
from tests.support.servers import RedisServer, free_port

pytestmark = pytest.mark.slow


def test_default_pipeline_serves(
    serve: Callable[..., ServeProcess], redis_server: RedisServer
) -> None:
    port = free_port()
    env = {"STREAMSEG_REDIS_URL": redis_server.url, "STREAMSEG_HTTP_PORT": str(port)}
    proc = serve(None, path=REPO / "pipeline.yaml", env=env, http_port=port)
    client = redis_server.client()

    def published() -> bool:
        return all(client.xlen(f"streamseg:detections:{c}") >= 2 for c in ("synth-a", "synth-b"))

    proc.wait_for(published, 120, "both synthetic cameras publish")
    r = proc.readyz()
    assert r["http_status"] == 200 and set(r["cameras"]) == {"synth-a", "synth-b"}
    assert "RANDOM weights" in proc.log  # no demo checkpoint here: it says so
    assert proc.terminate() == 0, proc.tail()
    assert "Traceback" not in proc.log
