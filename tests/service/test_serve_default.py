"""The default pipeline.yaml starts as it is: the demo model finds objects, rules fire."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from streamseg.ops import rle_to_mask
from tests.support.serve import REPO, ServeProcess
from tests.support.servers import RedisServer, free_port

pytestmark = pytest.mark.slow

SYNTHETIC_CLASSES = {"disc", "square", "triangle", "star"}


def test_default_pipeline_serves(
    serve: Callable[..., ServeProcess], redis_server: RedisServer
) -> None:
    port = free_port()
    env = {"STREAMSEG_REDIS_URL": redis_server.url, "STREAMSEG_HTTP_PORT": str(port)}
    proc = serve(None, path=REPO / "pipeline.yaml", env=env, http_port=port)
    client = redis_server.client()

    def published() -> bool:
        return all(client.xlen(f"streamseg:detections:{c}") >= 5 for c in ("synth-a", "synth-b"))

    proc.wait_for(published, 120, "both synthetic cameras publish")
    r = proc.readyz()
    assert r["http_status"] == 200 and set(r["cameras"]) == {"synth-a", "synth-b"}
    assert "RANDOM weights" not in proc.log and "warm-up batch took" in proc.log
    # The shipped demo model sees the scene's objects: tracked, labelled, masked.
    found = []
    for _id, fields in client.xrange("streamseg:detections:synth-a"):
        found += json.loads(fields[b"data"])["instances"]
    assert found, "the demo model found nothing in the synthetic scene"
    assert {i["label_name"] for i in found} <= SYNTHETIC_CLASSES
    assert all(i["mask"]["size"] == [240, 320] for i in found)
    # Serving pastes masks as box-local crops: the published RLE still holds them.
    assert any(bool(rle_to_mask(i["mask"]).any()) for i in found)
    assert any(i["track_id"] is not None for i in found)
    # synth-a's rules (a line through the middle, a zone on the right) fire.
    proc.wait_for(lambda: client.xlen("streamseg:alerts") >= 1, 120, "an alert is published")
    _id, fields = client.xrange("streamseg:alerts", count=1)[0]
    alert = json.loads(fields[b"data"])
    assert alert["camera_id"] == "synth-a" and alert["label_name"] in SYNTHETIC_CLASSES
    assert alert["rule"] in {"enter-right", "cross-middle", "linger-right", "crowd-right"}
    # The shipped file runs the model in its own process; stopping ends it.
    found_pid = re.search(r"model: started its own process \(pid (\d+)\)", proc.log)
    assert found_pid, proc.tail()
    worker = Path(f"/proc/{found_pid.group(1)}")
    assert worker.exists()
    model = proc.readyz()["model"]
    assert model["process"] == {
        "pid": int(found_pid.group(1)),
        "state": "running",
        "restarts": 0,
        "last_error": None,
    }
    # No GPU kernel failed in the worker (a CPU model uses the C++ kernels).
    assert model["ops_on_reference"] == {}
    assert proc.terminate() == 0, proc.tail()
    assert "Traceback" not in proc.log
    assert not worker.exists() or worker.joinpath("stat").read_text().split(") ")[1][0] in "ZX"
