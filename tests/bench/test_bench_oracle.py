"""``streamseg bench pipeline --model oracle``: the scene's exact instances reach Redis,
and the JSON reports CPU time per stage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
import torch

from streamseg.bench.report import HOST_STAGES
from streamseg.ops import rle_to_mask  # type: ignore[attr-defined]
from streamseg.runtime.stats import STAGE_CPU
from streamseg.synthetic.scene import SyntheticScene
from tests.support.serve import service_pipeline
from tests.support.servers import RedisServer

URL = "synthetic://?seed=3&width=96&height=64&fps=5&objects=3"
FRAMES = 6


def _pipeline(tmp_path: Path, redis_url: str) -> Path:
    alerts = {
        "cameras": {
            "scene": {
                "coordinates": "normalized",
                "zones": {"left": {"polygon": [[0, 0], [0.5, 0], [0.5, 1], [0, 1]]}},
                "rules": [{"name": "enter-left", "type": "zone", "zone": "left"}],
            }
        }
    }
    cams = [{"id": "scene", "url": URL}]
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(service_pipeline(cams, {"url": redis_url}, alerts=alerts)))
    return path


@pytest.mark.parametrize("source", ["memory", "h264"])
def test_oracle_publishes_ground_truth(cli, tmp_path: Path, redis_server: RedisServer, source):  # type: ignore[no-untyped-def]
    path = _pipeline(tmp_path, redis_server.url)
    args = ("bench", "pipeline", str(path), "--model", "oracle", "--input", source)
    if source == "memory":  # the per-frame Python threads on one CPU
        args += ("--host-cpu", "last")
    proc = cli(*args, "--frames", str(FRAMES), "--cameras", "2", timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "oracle" and out["input"] == source
    pinned = max(os.sched_getaffinity(0)) if source == "memory" else None
    assert out["host_cpu"] == pinned
    assert out["image_size"] == [64, 96] and out["rules_per_camera"] == 1
    assert out["scene_objects"] == 3 and 0 < out["objects_per_frame"] <= 3
    assert out["e2e_frames_published"] == 2 * FRAMES and out["e2e_fps"] > 0
    per_frame = out["cpu_ms_per_frame"]
    assert set(per_frame) == {*STAGE_CPU, "other", "process"}
    assert all(v >= 0 for v in per_frame.values())
    for stage in ("model", "track", "rules", "masks", "json", "publish"):
        assert per_frame[stage] > 0, stage
    host = sum(per_frame[s] for s in HOST_STAGES)
    assert out["host_ms_per_frame"] == pytest.approx(host, abs=1e-3)
    assert out["host_fps_per_core"] == pytest.approx(1000 / host, rel=1e-2)
    if source == "h264":
        assert out["decode"]["frames"] == FRAMES and out["decode"]["fps_per_core"] > 0
        assert per_frame["decode"] > 0
    else:
        assert out["decode"] is None

    scene = SyntheticScene.from_url(URL)
    client = redis_server.client()
    for camera in ("bench0", "bench1"):
        entries = client.xrange(f"streamseg:detections:{camera}")
        messages = [orjson.loads(fields[b"data"]) for _id, fields in entries]
        assert [m["seq"] for m in messages] == list(range(FRAMES)), camera
        for m in messages:
            gt = scene.frame(m["seq"]).gt
            assert [i["label"] for i in m["instances"]] == gt.labels.tolist()
            assert [i["box"] for i in m["instances"]] == gt.boxes.tolist()
            assert {i["score"] for i in m["instances"]} <= {1.0}
        assert any(m["instances"] for m in messages)
    # One frame's masks, decoded from the published RLE, are the scene's masks.
    last = orjson.loads(client.xrange("streamseg:detections:bench0")[-1][1][b"data"])
    gt = scene.frame(FRAMES - 1).gt
    assert gt.masks is not None and len(gt) > 0
    decoded = torch.stack([rle_to_mask(i["mask"]) for i in last["instances"]])
    assert torch.equal(decoded, gt.masks)


def test_oracle_needs_a_synthetic_camera(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "clip.mp4").write_bytes(b"")  # never read: the oracle refuses first
    config = service_pipeline([{"id": "f", "url": str(tmp_path / "clip.mp4")}], {})
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(config))
    proc = cli("bench", "pipeline", str(path), "--model", "oracle", timeout=60)
    assert proc.returncode == 2
    assert "needs a synthetic camera" in proc.stderr


def test_oracle_h264_needs_an_even_size(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _pipeline(tmp_path, "redis://127.0.0.1:1/0")
    proc = cli("bench", "pipeline", str(path), "--model", "oracle", "--width", "95", timeout=60)
    assert proc.returncode == 2
    assert "even frame size" in proc.stderr and "--input memory" in proc.stderr
