"""Hot swap in a running ``streamseg serve``: by `streamseg swap` over Redis, and by file watch.

The service runs the shipped demo checkpoint on a synthetic clip (a file
source, paced at its frame rate, so no frame may be lost). The new checkpoint
is the demo with every class but ``disc`` silenced in its classifier, so each
published instance shows which weights produced it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from streamseg.cli import main
from streamseg.models.checkpoint import read_checkpoint, save_checkpoint
from tests.conftest import run_cli
from tests.support.serve import (
    REPO,
    ServeProcess,
    checkpoint_model,
    detections,
    service_pipeline,
    summary,
)
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow

DEMO = REPO / "models" / "demo_small.pth"
CLASSES = {"disc", "square", "triangle", "star"}


def _discs_only(path: Path) -> Path:
    """The demo checkpoint whose classifier never says square, triangle or star."""
    ckpt = read_checkpoint(DEMO)
    state = dict(ckpt.state_dict)
    bias = state["roi_heads.box_predictor.cls_score.bias"].clone()
    bias[2:] = -1e4
    state["roi_heads.box_predictor.cls_score.bias"] = bias
    save_checkpoint(path, state, **ckpt.meta)
    return path


def _renamed(path: Path) -> Path:
    """The demo checkpoint with other class names (same tensors)."""
    ckpt = read_checkpoint(DEMO)
    names = ["__background__", "puck", "tile", "wedge", "spark"]
    save_checkpoint(path, ckpt.state_dict, **{**ckpt.meta, "class_names": names})
    return path


def _clip(tmp_path: Path, frames: int) -> Path:
    out = tmp_path / "scene"
    args = ["synth", "--out", str(out), "--seed", "1001", "--frames", str(frames)]
    result = run_cli(*args, "--size", "240x320", "--fps", "10", "--objects", "4")
    assert result.returncode == 0, result.stderr
    return out / "scene.mp4"


def _pipeline(redis: RedisServer, clip: Path, weights: Path, **model: object) -> dict:  # type: ignore[type-arg]
    # Paced like a camera, but not live: backpressure, every frame kept, and it ends.
    cams = [{"id": "clip", "url": str(clip), "realtime": True, "live": False}]
    model = {"batch_size": 1, "score_threshold": 0.5, **model}
    return service_pipeline(cams, {"url": redis.url}, model=checkpoint_model(weights, **model))


def _labels(messages: list[dict]) -> list[set[str]]:  # type: ignore[type-arg]
    return [{i["label_name"] for i in m["instances"]} for m in messages]


def _swap(
    capsys: pytest.CaptureFixture[str], url: str, weights: Path
) -> subprocess.CompletedProcess[str]:
    """``streamseg swap --wait 30`` run in this process: the clip plays on while it
    runs, and starting a new interpreter (seconds on a busy machine) could
    outlast it."""
    capsys.readouterr()
    code = main(["swap", "--redis", url, str(weights), "--wait", "30"])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["swap"], code, out, err)


@pytest.mark.parametrize("model_process", [False, True], ids=["in-process", "own-process"])
def test_swap_over_redis_between_batches_loses_no_frame(
    serve: Callable[..., ServeProcess],
    redis_server: RedisServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model_process: bool,
) -> None:
    """In process, and with the model in its own process (batches sent ahead,
    the swap loaded there, a refused file's reason carried back)."""
    frames = 100
    clip = _clip(tmp_path, frames)
    discs = _discs_only(tmp_path / "discs.pth")
    broken = tmp_path / "broken.pth"
    broken.write_bytes(discs.read_bytes()[:5000])  # a truncated download
    renamed = _renamed(tmp_path / "renamed.pth")
    config = _pipeline(redis_server, clip, DEMO)
    config.setdefault("runtime", {})["model_process"] = model_process
    proc = serve(config)
    client = redis_server.client()
    proc.wait_for(lambda: client.xlen("streamseg:detections:clip") >= 10, 120, "first frames")

    for refused, reason in ((broken, "truncated"), (renamed, "keeps the classes")):
        bad = _swap(capsys, redis_server.url, refused)
        assert bad.returncode == 1 and "kept its old model" in bad.stderr, bad.stderr
        assert reason in bad.stderr
    good = _swap(capsys, redis_server.url, discs)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["ok"] is True

    assert proc.wait(180) == 0, proc.tail()  # the clip ends, the service drains and exits
    messages = detections(client, "clip")
    assert [m["seq"] for m in messages] == list(range(frames))  # every frame, once, in order
    assert summary(proc.log, "clip")["lost"] == 0
    labels = _labels(messages)
    assert all(names <= CLASSES for names in labels)
    # The demo's several classes until the swap, then discs only: the new
    # weights took over between two batches; the refused files changed nothing.
    last_mixed = max(i for i, names in enumerate(labels) if names - {"disc"})
    assert 10 <= last_mixed < frames - 10
    assert any(labels[last_mixed + 1 :]), "no detections after the swap"
    assert f"now serving {discs}" in proc.log
    assert ("model: started its own process" in proc.log) == model_process


def test_watch_weights_reloads_a_replaced_file(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    clip = _clip(tmp_path, 100)
    weights = tmp_path / "live.pth"
    shutil.copyfile(DEMO, weights)
    proc = serve(_pipeline(redis_server, clip, weights, watch_weights=True, hot_swap=False))
    client = redis_server.client()
    proc.wait_for(lambda: client.xlen("streamseg:detections:clip") >= 10, 120, "first frames")
    # Replace the file the way a deployment would: write aside, rename over.
    _discs_only(tmp_path / "next.pth").replace(weights)
    assert proc.wait(180) == 0, proc.tail()
    labels = _labels(detections(client, "clip"))
    assert any(names - {"disc"} for names in labels[:10])
    assert all(names <= {"disc"} for names in labels[-10:]), labels[-10:]
    assert f"now serving {weights}" in proc.log
