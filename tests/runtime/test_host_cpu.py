"""``runtime.host_cpu``: the threads that run Python for every frame share one CPU."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from streamseg.bench.clips import MemorySource
from streamseg.bench.oracle import OracleSegmenter
from streamseg.config import load_pipeline
from streamseg.config.runtime import RuntimeConfig
from streamseg.runtime.factory import build_pipeline
from streamseg.synthetic.scene import SyntheticScene
from tests.support.serve import service_pipeline
from tests.support.servers import RedisServer

URL = "synthetic://?seed=5&width=96&height=64&fps=5&objects=3"
FRAMES = 120

needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs a Linux process allowed on two CPUs",
)


@needs_two_cpus
def test_last_is_the_highest_usable_cpu_and_others_are_refused() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    assert RuntimeConfig(host_cpu="last").pinned_cpu() == cpus[-1]
    assert RuntimeConfig(host_cpu=cpus[0]).pinned_cpu() == cpus[0]
    assert RuntimeConfig().pinned_cpu() is None
    with pytest.raises(ValueError, match=r"runtime\.host_cpu: CPU 4095 is not one"):
        RuntimeConfig(host_cpu=4095).pinned_cpu()


@needs_two_cpus
def test_host_path_threads_run_on_the_chosen_cpu(tmp_path: Path, redis_server: RedisServer) -> None:
    everywhere = os.sched_getaffinity(0)
    cams = [{"id": "scene", "url": URL}]
    path = tmp_path / "pipeline.yaml"
    runtime = {"torch_threads": 1, "host_cpu": "last", "camera_queue": 1}
    path.write_text(json.dumps(service_pipeline(cams, {"url": redis_server.url}, runtime=runtime)))
    config = load_pipeline(path)
    scene = SyntheticScene.from_url(URL + f"&frames={FRAMES}")
    oracle = OracleSegmenter.from_scene(scene, ["scene"], frames=FRAMES)
    images = [scene.frame(i).image for i in range(FRAMES)]
    pipeline = build_pipeline(
        config, segmenter=oracle, sources={"scene": MemorySource("scene", images, scene.fps)}
    )
    pipeline.start()
    try:
        running = {t.name: t for t in threading.enumerate() if t.native_id is not None}
        allowed = {
            name: os.sched_getaffinity(t.native_id)  # type: ignore[arg-type]
            for name, t in running.items()
            if t.is_alive()
        }
    finally:
        pipeline.wait()
        pipeline.join()
    last = max(everywhere)
    assert allowed["track"] == allowed["publish"] == allowed["sink:redis"] == {last}
    # Decoding and the model keep every CPU, and so does the thread that started them.
    assert allowed["segment"] == everywhere
    assert allowed.get("ingest:scene", everywhere) == everywhere
    assert os.sched_getaffinity(0) == everywhere
    assert pipeline.failure is None
    assert pipeline.stats.snapshot()["scene"].published == FRAMES
