"""``streamseg serve`` with a model that fails, in both ``runtime.model_process`` modes.

The model is ``maskrcnn_small_faulty``: the small Mask R-CNN failing on
the forward passes its checkpoint names (pass 0 is the warm-up). A failed
batch costs its frames, which ``/readyz``, the metrics, the console and
the exit summary show by name; the model's own process, when it dies, is
started again (with backoff) and the restarts shown. Failures in a row stop
``serve`` with exit code 1 and the error's message, never a silent hang.
(Serving going on after a failure, and a worker started again that
serves: tests/runtime/test_model_faults.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.checkpoints import random_checkpoint
from tests.support.console import call
from tests.support.serve import (
    ServeProcess,
    checkpoint_model,
    metric,
    service_pipeline,
    summary,
)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow

MODES = pytest.mark.parametrize("model_process", [False, True], ids=["in-process", "own-process"])
URL = "synthetic://?seed=3&width=96&height=64&fps=10&objects=3"
FAULT = "RuntimeError: maskrcnn_small_faulty: fault injected on forward pass"
ENDED = "the model's process ended (exit code 70)"


def _config(tmp_path: Path, redis: RedisServer, faults: str, model_process: bool) -> dict:  # type: ignore[type-arg]
    weights = random_checkpoint(tmp_path / "faulty.pth", 0, faults=faults)
    model = checkpoint_model(weights, arch="maskrcnn_small_faulty", max_wait_ms=200, hot_swap=False)
    return service_pipeline(
        [{"id": "cam", "url": URL}],
        {"url": redis.url},
        runtime={"torch_threads": 1, "model_process": model_process, "drain_timeout": 10},
        model=model,
    )


@MODES
def test_a_failing_model_is_reported_then_stops_serve_with_its_error(
    serve: Callable[..., ServeProcess],
    redis_server: RedisServer,
    tmp_path: Path,
    model_process: bool,
) -> None:
    """In process, forward pass 4 raises, passes 5 to 19 work, then every pass
    raises. The model's own process dies at its first batch (exit code 70),
    every time it is started again (the count starts again with it): each
    batch goes to two processes, both die, and it fails; after four processes
    in a row it gives up."""
    faults = "1+=exit" if model_process else "4=raise,20+=raise"
    proc = serve(_config(tmp_path, redis_server, faults, model_process))

    def reported() -> dict[str, Any] | None:
        ready = proc.readyz()
        model = ready.get("model", {})
        if model.get("failed_batches", 0) < 1:
            return None
        if model_process and model["process"]["restarts"] < 1:
            return None
        if not model_process and ready["cameras"]["cam"]["counts"]["published"] < 8:
            return None  # serving goes on after the failure: passes 1-3 and 5 published
        return model

    model = proc.wait_for(reported, 120, "a failed batch (and a restart) on /readyz")
    if model_process:
        assert model["process"]["last_error"] == "the model's process ended (exit code 70)"
        assert model["last_error"] == f"ModelProcessError: {ENDED} before it answered"
    else:
        assert model["last_error"] == f"{FAULT} 4" and model["failed_in_a_row"] == 0
    text = proc.get("/metrics")[1]
    assert (metric(text, "streamseg_model_failed_batches_total") or 0) >= 1
    assert (metric(text, "streamseg_model_restarts_total") or 0) >= int(model_process)
    assert (metric(text, "streamseg_frames_lost_total", reason="segment_error") or 0) >= 2
    health = call(proc.http_port, "GET", "/api/health")[1]["model"]
    assert health["failed_batches"] >= 1 and health["last_error"]
    assert ("process" in health) == model_process

    # Then every batch fails: serve gives up, with the error, exit code 1.
    assert proc.wait(180) == 1, proc.tail()
    log = proc.log
    assert "the model failed 5 batches in a row" in log
    if model_process:
        error = f"ModelProcessError: {ENDED}; 4 of its processes in a row ended without answering"
        assert f"model: {ENDED}; starting it again in 1 s" in log  # the restarts back off
    else:
        error = f"{FAULT} 24"
    assert f"runtime: stopped because of a failure: {error}" in log, proc.tail()
    counts = summary(log, "cam")
    assert counts["lost"] >= 10 and counts["read"] >= counts["published"] + counts["lost"]
