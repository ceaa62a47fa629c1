"""Mask2Former trained for panoptic segmentation: ``streamseg train`` on synthetic scenes
with stuff runs and its evaluation reports PQ; ``streamseg eval`` prints PQ and mIoU.

A few iterations only (CI): what the run reaches is scripts/train_panoptic.sh's
business (docs/mask2former.md gives the figure).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamseg.cli import main
from streamseg.models.checkpoint import read_checkpoint
from tests.support.training import tiny_yaml

SCENE = "synthetic://?seed=3&width=96&height=64&objects=3&stuff=1"
MODEL = (
    "model:\n"
    "  arch: mask2former_tiny\n"
    "  roi_samples_per_image: 256\n"
    "  options: {task: panoptic, stuff_classes: [ground, road, water], min_size: 64,"
    " max_size: 96, num_queries: 16}\n"
)
DATA = (
    f'    - synthetic: "{SCENE}"\n      frames: 4\n'
    f'  val:\n    - synthetic: "{SCENE}&start=40"\n      frames: 2\n'
)


def test_panoptic_training_runs_and_reports_pq(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    config = tmp_path / "panoptic.yaml"
    config.write_text(
        tiny_yaml(out, iterations=2, train=DATA, model=MODEL)
        + "eval:\n  period: 2\n  metric: panoptic.PQ\n"
    )
    assert main(["train", str(config), "--threads", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    panoptic = summary["eval"]["panoptic"]
    assert set(panoptic) == {f"{m}{s}" for m in ("PQ", "SQ", "RQ") for s in ("", "_th", "_st")}
    assert 0.0 <= panoptic["PQ"] <= 1.0 and summary["best"] == panoptic["PQ"]
    assert 0.0 <= summary["eval"]["sem_seg"]["mIoU"] <= 1.0
    final = out / "model_final.pth"
    meta = read_checkpoint(str(final)).meta
    assert meta["model_options"]["task"] == "panoptic"
    assert meta["class_names"][-3:] == ["ground", "road", "water"]

    data = f"{SCENE}&start=80&frames=2"
    assert main(["eval", "--weights", str(final), "--data", data]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"panoptic", "sem_seg", "segm"} <= set(result)
    assert 0.0 <= result["panoptic"]["PQ_st"] <= 1.0
    assert main(["eval", "--weights", str(final), "--data", data, "--task", "semantic"]) == 0
    semantic = json.loads(capsys.readouterr().out)
    assert "segm" not in semantic and 0.0 <= semantic["sem_seg"]["mIoU"] <= 1.0
