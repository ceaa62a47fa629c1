"""runtime.model_process: the model in its own process gives what it gives in process,
hot-swaps, survives its process being killed (losing nothing), and reports a failed
start clearly."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from streamseg.bench.clips import MemorySource
from streamseg.config import ConfigError, load_pipeline
from streamseg.hosting.build import build_model_stage
from streamseg.hosting.process import ModelProcess, ModelProcessError
from streamseg.hosting.segmenter import build_segmenter
from streamseg.models.checkpoint import CheckpointError
from streamseg.runtime.factory import build_pipeline
from streamseg.segment.config import ModelConfig
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import Frame, FrameBatch, Instances, MaskCrops
from tests.support.checkpoints import NAMES, random_checkpoint
from tests.support.processes import ended
from tests.support.serve import scene_pipeline
from tests.support.servers import RedisServer
from tests.support.threads import one_thread

URL = "synthetic://?seed=6&width=96&height=64&fps=10&objects=3"


def _batches(count: int) -> list[FrameBatch]:
    scene = SyntheticScene.from_url("synthetic://?seed=6&width=96&height=64&objects=3")
    frames = [Frame("c", i, i / 15, 0.0, scene.frame(i).image) for i in range(2 * count)]
    return [FrameBatch((frames[i], frames[i + 1])) for i in range(0, 2 * count, 2)]


def _same(a: Instances, b: Instances) -> None:
    assert a.image_size == b.image_size and len(a) == len(b) > 0
    assert torch.equal(a.boxes, b.boxes) and torch.equal(a.scores, b.scores)
    assert torch.equal(a.labels, b.labels)
    assert isinstance(a.masks, MaskCrops) and isinstance(b.masks, MaskCrops)
    assert torch.equal(a.masks.boxes, b.masks.boxes)
    assert all(torch.equal(x, y) for x, y in zip(a.masks.crops, b.masks.crops, strict=True))


@pytest.fixture(name="one_thread")
def _one_thread() -> Iterator[None]:
    """In process on one thread, as the worker runs: the same sums, the same results."""
    with one_thread():
        yield


@pytest.fixture
def weights(tmp_path: Path) -> tuple[Path, Path]:
    return random_checkpoint(tmp_path / "a.pth", 0), random_checkpoint(tmp_path / "b.pth", 1)


def _model(path: Path) -> ModelConfig:
    return ModelConfig(arch="maskrcnn_small", weights=str(path), batch_size=2)


def test_same_instances_swap_and_restart(
    weights: tuple[Path, Path], one_thread: None, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = weights
    batches = _batches(3)
    caplog.set_level(logging.INFO)
    proc = ModelProcess(_model(a), threads=1, nice=3)
    lowered = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 3)
    try:
        pid = proc.pid()
        assert pid is not None and pid != os.getpid()
        # runtime.model_nice: the model yields the CPU to this process's stages.
        assert os.getpriority(os.PRIO_PROCESS, pid) == lowered
        assert proc.class_names == tuple(NAMES)
        assert proc.region_classes == ()  # an instance model: the rules' checks need it
        # The worker's own log lines reach this process's handlers (soon: they
        # come through a queue of their own).
        deadline = time.monotonic() + 10
        while not any(
            r.process == pid and "warm-up batch took" in r.getMessage() for r in caplog.records
        ):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
        local = build_segmenter(_model(a))
        for batch in batches:
            for x, y in zip(proc.segment(batch), local.segment(batch), strict=True):
                _same(x, y)
        assert proc.cpu_seconds > 0 and proc.process_cpu_seconds() >= proc.cpu_seconds
        assert proc.peak_rss_mb > 50  # a torch process, measured there

        # Hot swap: b is loaded there; the results are b's.
        proc.load_weights(str(b))
        local.load_weights(str(b))
        for x, y in zip(proc.segment(batches[0]), local.segment(batches[0]), strict=True):
            _same(x, y)
        # A checkpoint of other classes is refused as in process, and b stays.
        other = random_checkpoint(a.parent / "other.pth", 2, [*NAMES, "cone"])
        with pytest.raises(CheckpointError) as refused:
            proc.load_weights(str(other))
        with pytest.raises(CheckpointError) as refused_here:
            local.load_weights(str(other))
        assert str(refused.value) == str(refused_here.value)
        for x, y in zip(proc.segment(batches[1]), local.segment(batches[1]), strict=True):
            _same(x, y)

        # Killed with a batch in flight (stopped first, so that it cannot
        # finish it): a new worker is started at once, loads b again, and runs
        # that batch: nothing is lost.
        os.kill(pid, signal.SIGSTOP)
        in_flight = proc.submit(batches[2])
        os.kill(pid, signal.SIGKILL)
        for x, y in zip(in_flight.result(120), local.segment(batches[2]), strict=True):
            _same(x, y)
        assert ended(pid)
        assert proc.restarts == 1 and proc.pid() not in (None, pid)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid()) == lowered  # the new one too
        assert proc.health()["last_error"] == "the model's process ended (killed by SIGKILL)"
        local.close()
    finally:
        last = proc.pid()
        blocks = proc._blocks.names()
        proc.close()
    assert last is not None and ended(last), "close() ends the worker"
    assert blocks and not any(Path("/dev/shm", b.lstrip("/")).exists() for b in blocks)
    with pytest.raises(ModelProcessError, match="closed"):
        proc.segment(batches[0])


def test_failed_start_says_why(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pth"
    with pytest.raises(FileNotFoundError, match=r"nowhere\.pth"):
        ModelProcess(_model(missing), threads=1)


def test_dali_cameras_are_refused(tmp_path: Path) -> None:
    text = """
cameras:
  - {id: a, url: rtsp://127.0.0.1:8554/a, decode: dali}
model: {device: cuda}
runtime:
  model_process: true
"""
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as bad:
        load_pipeline(path)
    message = bad.value.format()
    assert "cameras[0].decode" in message or "cameras.0.decode" in message
    assert "runtime.model_process: false" in message


def test_pipeline_sends_batches_ahead_and_survives_a_killed_model(
    weights: tuple[Path, Path], tmp_path: Path, redis_server: RedisServer
) -> None:
    """A running pipeline: batches go to the model's process through the
    submit/collect threads; killing that process loses nothing: a new one is
    started and gets the batches the killed one held, then the rest."""
    a, _b = weights
    frames = 60
    config = scene_pipeline(tmp_path, redis_server.url, a, url=URL)
    scene = SyntheticScene.from_url(URL)
    images = [scene.frame(i).image for i in range(frames)]
    model = build_model_stage(config)
    assert isinstance(model, ModelProcess)
    source = _Paced("scene", images, every=0.02)
    pipeline = build_pipeline(config, segmenter=model, sources={"scene": source})
    first = model.pid()
    assert first is not None
    pipeline.start()
    try:
        names = {t.name for t in threading.enumerate()}
        assert {"segment", "segment-results"} <= names
        source.reached(frames // 3).wait(30)
        # Stopped first, so that batches pile up in flight (two, then submit
        # waits), then killed: those two batches go to the next process. The
        # second wait comes after any answer sent before the stop has been read.
        os.kill(first, signal.SIGSTOP)
        _wait_in_flight(model)
        time.sleep(0.3)
        _wait_in_flight(model)
        os.kill(first, signal.SIGKILL)
        assert pipeline.wait(120), "the pipeline did not finish"
    finally:
        pipeline.join()
        model.close()
    stats = pipeline.stats.snapshot()["scene"]
    assert pipeline.failure is None
    assert model.restarts == 1 and ended(first)
    assert (stats.lost, stats.skipped, stats.published) == (0, 0, frames)
    assert pipeline.segment_stage.health()["failed_batches"] == 0
    messages = [
        json.loads(fields[b"data"])
        for _id, fields in redis_server.client().xrange("streamseg:detections:scene")
    ]
    seqs = [m["seq"] for m in messages]
    assert seqs == sorted(seqs) and len(seqs) == stats.published  # in order, each once
    assert seqs[-1] == frames - 1


def _wait_in_flight(model: ModelProcess) -> None:
    deadline = time.monotonic() + 30
    while len(model._pending) < ModelProcess.IN_FLIGHT:
        assert time.monotonic() < deadline, "no batches went in flight"
        time.sleep(0.01)


class _Paced(MemorySource):
    """A file-like source that hands over a frame every ``every`` seconds."""

    def __init__(self, camera_id: str, images: list[torch.Tensor], every: float) -> None:
        super().__init__(camera_id, images)
        self.every, self._marks = every, {}

    def reached(self, count: int) -> threading.Event:
        return self._marks.setdefault(count, threading.Event())

    def run(self, emit, stop):  # type: ignore[no-untyped-def]
        def paced(frame: Frame) -> None:
            time.sleep(self.every)
            emit(frame)
            mark = self._marks.get(frame.seq + 1)
            if mark is not None:
                mark.set()

        super().run(paced, stop)
