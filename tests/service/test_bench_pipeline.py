"""``streamseg bench pipeline`` prints one JSON object with the figures it promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.serve import service_pipeline
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow


def test_bench_pipeline_json(cli, tmp_path: Path, redis_server: RedisServer) -> None:  # type: ignore[no-untyped-def]
    cams = [
        {"id": "a", "url": "synthetic://?seed=1&width=160&height=120&fps=5&objects=2"},
        {"id": "b", "url": "synthetic://?seed=2&width=160&height=120&fps=5&objects=2"},
    ]
    path = tmp_path / "pipeline.yaml"
    http = {"live_fps": 30}  # the clip lasts a fraction of a second: the viewers must see it
    path.write_text(json.dumps(service_pipeline(cams, {"url": redis_server.url}, http=http)))
    args = ("bench", "pipeline", str(path), "--frames", "24", "--warmup", "1", "--seconds", "2")
    args += ("--repeat", "2")
    args += ("--viewers",)
    proc = cli(*args, timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["frames"] == 24 and out["image_size"] == [120, 160]
    assert out["e2e_frames_published"] == 24
    assert out["model_fps"] > 0 and out["e2e_fps"] > 0 and out["ratio"] > 0
    # Two alternated pairs; the figures are those of the lower-ratio pair (the median of two).
    assert len(out["ratios"]) == 2 and out["ratio"] == min(out["ratios"])
    assert out["ratio"] == pytest.approx(out["e2e_fps"] / out["model_fps"], abs=2e-3)
    assert out["goal_ratio"] == 0.95
    assert out["latency_p50_ms"] <= out["latency_p90_ms"] <= out["latency_p99_ms"]
    live = out["live"]
    assert set(live["cameras"]) == {"a", "b"}
    for cam in live["cameras"].values():
        assert cam["read"] > 0 and cam["camera_fps"] > 0
        assert cam["read"] >= cam["segmented"]
        assert cam["realtime_ratio"] == pytest.approx(cam["segmented"] / cam["read"], 1e-2)
        assert cam["skipped"] == sum(cam["skipped_by_reason"].values())
        assert cam["lost"] == sum(cam["lost_by_reason"].values()) == 0
        assert cam["state"] == "streaming"
    assert out["peak_rss_mb"] > 0
    # --viewers: the clip again, with a console viewer drawing and encoding every camera.
    assert out["e2e_fps_with_viewers"] > 0 and out["viewer_frames"] > 0
    assert out["viewer_cost"] == pytest.approx(
        1 - out["e2e_fps_with_viewers"] / out["e2e_fps"], abs=2e-3
    )
