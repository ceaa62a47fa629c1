"""``streamseg train`` fine-tunes Mask2Former (the tiny one, 64x96 synthetic frames), and
what it writes serves: ``streamseg eval`` and the Segmenter load the checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streamseg.models.checkpoint import read_checkpoint
from streamseg.segment import Segmenter
from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES as NAMES
from tests.segment.conftest import scene_batch
from tests.support.servers import cli_env
from tests.support.training import SCENE, losses, tiny_yaml

REPO = Path(__file__).resolve().parents[2]

MODEL = (
    "model:\n"
    "  arch: mask2former_tiny\n"
    "  roi_samples_per_image: 256\n"  # mask points per instance (num_points)
    "  freeze_backbone_stages: 1\n"
    "  options: {min_size: 64, max_size: 96, score_threshold: 0.0}\n"
)
# The train list, then a validation set (the data section's next key).
DATA = (
    f'    - synthetic: "{SCENE}"\n      frames: 4\n'
    f'  val:\n    - synthetic: "{SCENE}&start=40"\n      frames: 2\n'
)


def _streamseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamseg", *args],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_train_cli_then_eval_and_serve_the_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = tmp_path / "m2f.yaml"
    config.write_text(
        tiny_yaml(out, iterations=4, train=DATA, model=MODEL) + "eval:\n  period: 4\n"
    )
    done = _streamseg("train", str(config), "--threads", "1")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["iteration"] == 4 and not summary["stopped"]
    assert set(summary["eval"]["segm"]) >= {"AP", "AP50"}

    rows = losses(out)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    assert all({"loss_class", "loss_mask", "loss_dice"} <= set(r) for r in rows)
    assert all(0 < r["loss"] < float("inf") for r in rows)
    final = out / "model_final.pth"
    meta = read_checkpoint(str(final)).meta
    assert meta["arch"] == "mask2former_tiny" and meta["class_names"] == list(NAMES)
    assert meta["num_classes"] == len(NAMES)  # counts the background, as in pipeline.yaml
    assert meta["model_options"]["num_classes"] == len(NAMES) - 1  # Mask2Former's own count
    assert meta["model_options"]["num_points"] == 256

    evaluated = _streamseg("eval", "--weights", str(final), "--data", f"{SCENE}&frames=2")
    assert evaluated.returncode == 0, evaluated.stderr
    assert 0.0 <= json.loads(evaluated.stdout)["segm"]["AP"] <= 1.0

    segmenter = Segmenter(arch="mask2former_tiny", weights=str(final))
    assert segmenter.class_names == NAMES
    (result,) = segmenter.segment(scene_batch([(64, 96)]))
    assert result.image_size == (64, 96) and len(result) > 0
    assert bool((result.labels >= 1).all() and (result.labels < len(NAMES)).all())
