"""A file source loses no frame: every frame index reaches Redis exactly once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.serve import ServeProcess, detections, service_pipeline, summary
from tests.support.servers import RedisServer
from tests.support.video import count_frames, write_h264

pytestmark = pytest.mark.slow


def test_file_source_every_frame_exactly_once(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    clip = write_h264(tmp_path / "clip.mp4", frames=30, width=160, height=120, gop=10)
    n = count_frames(clip)
    cams = [{"id": "clip", "url": str(clip)}]
    # camera_queue 1: reading is far faster than the model, so the source
    # waits on a full queue all the time (backpressure, not drops).
    config = service_pipeline(cams, {"url": redis_server.url})
    config["runtime"]["camera_queue"] = 1
    proc = serve(config)
    assert proc.wait(120) == 0, proc.tail()  # ends by itself when the file is done
    seqs = [m["seq"] for m in detections(redis_server.client(), "clip")]
    assert sorted(seqs) == list(range(n))  # every frame, none twice
    assert seqs == sorted(seqs)  # in order
    counts = summary(proc.log, "clip")
    assert counts == {"read": n, "skipped": 0, "segmented": n, "published": n, "lost": 0}
