"""A model that fails reaches the pipeline at once, by name, in both `model_process` modes.

The model is ``maskrcnn_small_faulty`` (``tests/support/faulty_model.py``,
registered by ``tests/support/plugins.py``): the real small Mask R-CNN,
failing on the forward passes its checkpoint names (pass 0 is the warm-up).
A raised exception loses that batch's frames and is named in the pipeline's
health; failures in a row stop the pipeline with the error; a model process
that dies or hangs is ended and started again after a backoff; a worker ends
with its parent, even mid-start."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamseg.bench.clips import MemorySource
from streamseg.config.pipeline import PipelineConfig
from streamseg.errors import StartupError
from streamseg.hosting.build import build_model_stage
from streamseg.hosting.process import (
    MAX_ENDED_IN_A_ROW,
    ModelProcess,
    ModelProcessError,
    _backoff,
)
from streamseg.ingest.spec import SourceError
from streamseg.models.checkpoint import CheckpointError
from streamseg.runtime.factory import build_pipeline
from streamseg.runtime.pipeline import Pipeline
from streamseg.runtime.segmenting import MAX_FAILED_IN_A_ROW
from streamseg.segment.backends import BackendError
from streamseg.synthetic.scene import SyntheticScene
from streamseg.track.rules.engine import RuleError
from streamseg.types import Frame, FrameBatch
from tests.conftest import REPO
from tests.support.checkpoints import random_checkpoint
from tests.support.processes import children, ended
from tests.support.serve import scene_pipeline
from tests.support.servers import RedisServer, cli_env

URL = "synthetic://?seed=6&width=96&height=64&fps=10&objects=3"
MODES = pytest.mark.parametrize("model_process", [False, True], ids=["in-process", "own-process"])
FAULT = "RuntimeError: maskrcnn_small_faulty: fault injected on forward pass"


def _config(tmp_path: Path, redis: RedisServer, faults: str, model_process: bool) -> PipelineConfig:
    weights = random_checkpoint(tmp_path / "faulty.pth", 0, faults=faults)
    config: PipelineConfig = scene_pipeline(
        tmp_path,
        redis.url,
        weights,
        url=URL,
        arch="maskrcnn_small_faulty",
        model_process=model_process,
    )
    return config


def _run(config: PipelineConfig, frames: int) -> Pipeline:
    """The pipeline of ``config`` on ``frames`` frames of a file-like source, run to its end."""
    scene = SyntheticScene.from_url(URL)
    source = MemorySource("scene", [scene.frame(i).image for i in range(frames)])
    model = build_model_stage(config)
    pipeline = build_pipeline(config, segmenter=model, sources={"scene": source})
    pipeline.start()
    try:
        assert pipeline.wait(180), "the pipeline hung"
    finally:
        pipeline.join()
        model.close()
    return pipeline


@pytest.mark.parametrize(
    "exc",
    [
        BackendError("no such backend here", field="model.backend", fix="use eager"),
        CheckpointError("not a checkpoint"),
        RuleError("unknown class 'zebra'", field="alerts.cameras.a.rules[0].classes"),
        SourceError("camera 'a': V4L2 device /dev/video7 does not exist"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_startup_errors_survive_pickling_whole(exc: StartupError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and isinstance(back, StartupError)
    assert (str(back), back.field, back.fix) == (str(exc), exc.field, exc.fix)
    assert back.describe() == exc.describe() and back.field is not None
    assert back.describe().startswith(f"{back.field}: ")


@MODES
def test_a_batch_that_raises_loses_its_frames_and_names_the_error(
    tmp_path: Path, redis_server: RedisServer, model_process: bool
) -> None:
    pipeline = _run(_config(tmp_path, redis_server, "3=raise", model_process), frames=12)
    counts = pipeline.stats.snapshot()["scene"]
    health = pipeline.segment_stage.health()
    assert pipeline.failure is None
    assert health["failed_batches"] == 1 and health["failed_in_a_row"] == 0
    assert health["last_error"] == f"{FAULT} 3"
    # The third batch (forward pass 3; pass 0 was the warm-up): its two frames are lost.
    assert (counts.lost, counts.published, counts.skipped) == (2, 10, 0)
    assert pipeline.stats.reasons("lost")["scene"] == {"segment_error": 2}


@MODES
def test_failures_in_a_row_stop_the_pipeline_with_the_error(
    tmp_path: Path, redis_server: RedisServer, model_process: bool
) -> None:
    pipeline = _run(_config(tmp_path, redis_server, "2+=raise", model_process), frames=40)
    health = pipeline.segment_stage.health()
    assert isinstance(pipeline.failure, RuntimeError)
    assert str(pipeline.failure) == "maskrcnn_small_faulty: fault injected on forward pass 6"
    # What was queued when it gave up still drains (and fails): no frame is left behind.
    assert health["failed_in_a_row"] >= MAX_FAILED_IN_A_ROW
    counts = pipeline.stats.snapshot()["scene"]
    assert counts.published == 2  # pass 1 only
    assert counts.lost >= 2 * MAX_FAILED_IN_A_ROW
    assert counts.read == counts.published + counts.lost + counts.skipped


def test_a_model_process_that_dies_is_restarted_and_loses_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Every worker ends at its forward pass 3 (exit code 70): each time a new
    one is started at once and gets the batches the dead one held."""
    config = _config(tmp_path, redis_server, "3=exit", model_process=True)
    pipeline = _run(config, frames=24)
    process = pipeline.segmenter.health()  # type: ignore[attr-defined]
    assert pipeline.failure is None
    assert process["restarts"] >= 1 and process["state"] == "closed"
    assert process["last_error"] == "the model's process ended (exit code 70)"
    assert pipeline.segment_stage.health()["failed_batches"] == 0
    counts = pipeline.stats.snapshot()["scene"]
    assert (counts.published, counts.lost) == (24, 0)


def _batch(seq: int = 0) -> FrameBatch:
    scene = SyntheticScene.from_url(URL)
    return FrameBatch((Frame("c", seq, 0.0, 0.0, scene.frame(seq).image),))


def test_a_model_process_that_answers_nothing_is_ended(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Pass 2 hangs: after the answer timeout the worker is ended and the
    batch goes to a new one (its pass 1), well before the hour it would sleep."""
    config = _config(tmp_path, redis_server, "2=hang", model_process=True)
    model = ModelProcess(config.model, threads=1, answer_timeout=3.0)
    try:
        model.segment(_batch())  # pass 1
        first = model.pid()
        t0 = time.monotonic()
        assert len(model.segment(_batch())) == 1  # pass 2 hangs; a new worker answers
        waited = time.monotonic() - t0
        assert waited >= 3.0 and model.restarts == 1 and model.pid() not in (None, first)
        assert (
            model.health()["last_error"] == "the model's process answered nothing for 3 s; ended it"
        )
    finally:
        model.close()


def test_a_batch_whose_workers_all_die_fails_then_it_gives_up(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Every worker dies at its first batch: a batch sent to two of them fails,
    saying how the last one ended; after MAX_ENDED_IN_A_ROW in a row it gives
    up, and every batch fails at once with that."""
    config = _config(tmp_path, redis_server, "1+=exit", model_process=True)
    model = ModelProcess(config.model, threads=1)
    try:
        ended = "the model's process ended (exit code 70)"
        with pytest.raises(ModelProcessError, match=re.escape(f"{ended} before it answered")):
            model.segment(_batch())
        with pytest.raises(ModelProcessError, match=re.escape(f"{ended} before it answered")):
            model.segment(_batch())
        assert model.restarts == MAX_ENDED_IN_A_ROW - 1
        for _ in range(2):  # no more workers are started: at once, the same error
            with pytest.raises(ModelProcessError, match="in a row ended without answering"):
                model.segment(_batch())
        assert model.restarts == MAX_ENDED_IN_A_ROW - 1
        assert model.health()["state"] == "failed"
    finally:
        model.close()


def test_restart_backoff_grows_to_a_bound() -> None:
    assert [_backoff(n) for n in range(7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


_PARENT = """
import sys, threading, time
from streamseg.segment.config import ModelConfig
from streamseg.hosting.process import ModelProcess
model = ModelConfig(arch="maskrcnn_small_faulty", weights=sys.argv[1], batch_size=1)
threading.Thread(target=ModelProcess, args=(model,), kwargs={"threads": 1}, daemon=True).start()
time.sleep(600)
"""


def _workers(pid: int) -> list[int]:
    """``pid``'s children that run a spawned process's main (not its resource tracker)."""
    return [
        child
        for child, cmd in children(pid)
        if b"spawn_main" in cmd and b"resource_tracker" not in cmd
    ]


def test_a_worker_still_starting_ends_with_its_parent_and_on_sigterm(tmp_path: Path) -> None:
    """The worker's warm-up hangs (pass 0): it is still starting when its
    parent is SIGKILLed, and it ends anyway; it is in a process group of its
    own (a signal to the parent's group is the parent's to handle)."""
    weights = random_checkpoint(tmp_path / "hang.pth", 0, faults="0=hang")
    for how in ("parent killed", "worker terminated"):
        parent = subprocess.Popen(
            [sys.executable, "-c", _PARENT, str(weights)], env=cli_env(), cwd=REPO
        )
        try:
            deadline = time.monotonic() + 120
            while not (workers := _workers(parent.pid)):
                assert time.monotonic() < deadline and parent.poll() is None, "no worker"
                time.sleep(0.1)
            worker = workers[-1]
            # Past its own set-up (imports first): in a group of its own, watching its parent.
            while os.getpgid(worker) != worker:
                assert time.monotonic() < deadline, "the worker stays in its parent's group"
                time.sleep(0.1)
            assert os.getpgid(parent.pid) != worker
            time.sleep(1.0)  # building the model: its warm-up (pass 0) hangs
            if how == "parent killed":
                parent.kill()
            else:
                os.kill(worker, signal.SIGTERM)
            assert ended(worker, 10), f"{how}: the worker is still there"
        finally:
            parent.kill()
            parent.wait(10)
