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
        # A window's counters: frames already in the pipeline when it opened finish inside it.
        assert cam["in_flight_at_start"] >= 0
        done = cam["skipped"] + cam["segmented"] + cam["lost"]
        assert done <= cam["read"] + cam["in_flight_at_start"]
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


@pytest.mark.parametrize(
    ("model_process", "faults", "error"),
    [
        (False, "3=raise", "fault injected on forward pass 3"),
        (True, "3=raise", "fault injected on forward pass 3"),
        (True, "0=raise", "fault injected on forward pass 0"),  # at warm-up
    ],
    ids=["in-process-batch", "own-process-batch", "own-process-warm-up"],
)
def test_bench_pipeline_exits_1_with_the_models_error(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, redis_server: RedisServer, model_process: bool, faults: str, error: str
) -> None:
    """A model that raises (maskrcnn_small_faulty, at warm-up or on a batch of the
    untimed first runs) stops the benchmark at once: exit 1, no JSON, the error
    by name on the last line (the log above it has where it was raised); never
    a silent wait."""
    from tests.support.checkpoints import random_checkpoint

    weights = random_checkpoint(tmp_path / "faulty.pth", 0, faults=faults)
    cams = [{"id": "a", "url": "synthetic://?seed=1&width=96&height=64&fps=5&objects=2"}]
    runtime = {"torch_threads": 1, "model_process": model_process}
    config = service_pipeline(cams, {"url": redis_server.url}, runtime=runtime)
    config["model"] = {"arch": "maskrcnn_small_faulty", "weights": str(weights), "batch_size": 2}
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(config))
    args = ("bench", "pipeline", str(path), "--frames", "12", "--seconds", "0", "--repeat", "1")
    proc = cli(*args, timeout=180)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("streamseg: error: bench pipeline failed: "), proc.stderr
    assert f"RuntimeError: maskrcnn_small_faulty: {error}" in line
