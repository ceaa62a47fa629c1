"""Training runs of maskrcnn_small on tiny synthetic frames: loss, resume, outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from streamseg.cli import main
from streamseg.config import ConfigError
from streamseg.models.trained import load_trained_model
from streamseg.train.engine import run_training
from tests.support.training import StopAt, losses, tiny_config, weights


def test_a_short_run_lowers_the_loss(tmp_path: Path) -> None:
    # Two images, seen again and again: the loss must fall well below its start.
    cfg = tiny_config(tmp_path, frames=2, solver__iterations=16, solver__lr=0.003, data__hflip=0.0)
    result = run_training(cfg, install_signals=False)
    assert result.iteration == 16 and not result.stopped
    rows = losses(Path(cfg.output.dir))
    assert [r["iteration"] for r in rows] == list(range(1, 17))
    first = sum(r["loss"] for r in rows[:3]) / 3
    last = sum(r["loss"] for r in rows[-3:]) / 3
    assert last < 0.7 * first, (first, last)
    for name in ("last.pth", "model_final.pth", "config.json", "metrics.jsonl"):
        assert (Path(cfg.output.dir) / name).exists()
    model, names = load_trained_model(str(Path(cfg.output.dir) / "model_final.pth"))
    assert names == ("__background__", "disc", "square", "triangle", "star")
    assert not model.training


def test_eval_command_prints_ap_of_a_trained_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tiny_config(tmp_path, frames=2, solver__iterations=2)
    run_training(cfg, install_signals=False)
    weights_path = str(Path(cfg.output.dir) / "model_final.pth")
    scene = "synthetic://?seed=9&width=96&height=64&objects=3"
    args = ["eval", "--weights", weights_path, "--data", f"{scene}&frames=3"]
    assert main([*args, "--data", f"{scene}&frames=2&start=50"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["images"] == 5 and result["instances"] > 0
    assert result["weights"] == weights_path and len(result["data"]) == 2
    for kind in ("bbox", "segm"):
        assert set(result[kind]) == {"AP", "AP50", "AP75", "APs", "APm", "APl"}
        assert 0.0 <= result[kind]["AP"] <= result[kind]["AP50"] <= 1.0


def test_resume_after_interruption_continues_exactly(tmp_path: Path) -> None:
    straight = tiny_config(tmp_path, "straight")
    run_training(straight, install_signals=False)
    broken = tiny_config(tmp_path, "broken")
    first = run_training(broken, install_signals=False, extra_hooks=[StopAt(3)])
    assert first.stopped and first.iteration == 3
    assert not (Path(broken.output.dir) / "model_final.pth").exists()
    with pytest.raises(ConfigError, match="pass --resume"):
        run_training(broken, install_signals=False)
    second = run_training(broken, resume=True, install_signals=False)
    assert second.iteration == 6 and not second.stopped
    # Same losses at every iteration, bit for bit, and the same final weights.
    assert losses(Path(broken.output.dir)) == losses(Path(straight.output.dir))
    a = weights(Path(straight.output.dir) / "model_final.pth")
    b = weights(Path(broken.output.dir) / "model_final.pth")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
