"""synthetic:// cameras: the scene's frames, paced (live) or as fast as taken."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch

from streamseg.ingest import SourceError, open_source
from streamseg.synthetic.scene import SyntheticScene
from tests.support.sources import SourceRunner

URL = "synthetic://?seed=4&width=64&height=48&fps=20&objects=2"


def test_unpaced_scene_matches_the_generator_and_ends() -> None:
    source = open_source(camera_id="syn", url=URL + "&frames=40&pace=0")
    assert source.live is False
    frames: list[Any] = []
    t0 = time.monotonic()
    source.run(frames.append, threading.Event())
    assert time.monotonic() - t0 < 1.5  # paced at 20 fps it would take 1.95 s
    scene = SyntheticScene.from_url(URL + "&frames=40")
    assert [f.seq for f in frames] == list(range(40))
    for f in frames:
        assert f.pts == pytest.approx(scene.time(f.seq))
        assert torch.equal(f.image, scene.frame(f.seq).image)  # ground truth by seq
    assert source.health.state == "finished" and source.health.frames == 40


def test_paced_scene_is_live_at_its_fps() -> None:
    source = open_source(camera_id="live", url=URL)
    assert source.live is True
    with SourceRunner(source) as run:
        run.wait_frames(11, timeout=10)
        assert source.health.state == "streaming"
    frames = run.frames
    wall = frames[10].capture_time - frames[0].capture_time
    assert wall == pytest.approx(0.5, abs=0.15)  # ten intervals at 20 fps
    assert source.health.state == "stopped"


def test_scene_max_fps_and_restart_continue_the_sequence() -> None:
    source = open_source(camera_id="lim", url=URL + "&pace=0&frames=40", max_fps=5)
    frames: list[Any] = []
    stop = threading.Event()

    def emit(frame: Any) -> None:
        frames.append(frame)
        if len(frames) == 3:
            stop.set()

    source.run(emit, stop)
    source.run(frames.append, threading.Event())  # a restarted run goes on from there
    assert [f.seq for f in frames] == list(range(0, 40, 4))
    assert source.health.dropped_rate_limit == 30


def test_bad_scene_parameter_is_a_clear_error() -> None:
    with pytest.raises(SourceError, match=r"camera 'syn'.*unknown parameter 'colour'"):
        open_source(camera_id="syn", url="synthetic://?colour=red")
