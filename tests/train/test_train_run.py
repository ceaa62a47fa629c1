"""Training runs of maskrcnn_small on tiny synthetic frames: loss, resume, outputs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from streamseg.train.config import ConfigError
from streamseg.train.engine import run_training
from streamseg.train.modeling import load_trained_model
from streamseg.train.trainer import HookBase
from tests.support.servers import cli_env
from tests.support.training import losses, tiny_config, tiny_yaml, weights

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("streamseg.models.maskrcnn.build", reason="Mask R-CNN not merged yet")


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


class _StopAt(HookBase):
    """Asks the trainer to stop once it has finished iteration ``at``."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_step(self) -> None:
        if self.trainer.iter == self.at:
            self.trainer.request_stop()


def test_resume_after_interruption_continues_exactly(tmp_path: Path) -> None:
    straight = tiny_config(tmp_path, "straight")
    run_training(straight, install_signals=False)
    broken = tiny_config(tmp_path, "broken")
    first = run_training(broken, install_signals=False, extra_hooks=[_StopAt(3)])
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


def test_sigterm_saves_and_resume_finishes_the_run(tmp_path: Path) -> None:
    """``streamseg train`` stopped by SIGTERM (a pre-empted pod) resumes to the same weights."""
    path = tmp_path / "cli.yaml"
    out = tmp_path / "cli"
    path.write_text(tiny_yaml(out, iterations=8))
    args = [sys.executable, "-m", "streamseg", "train", str(path)]
    proc = subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    metrics = out / "metrics.jsonl"
    while time.monotonic() < deadline and not (
        metrics.exists() and len(metrics.read_text().splitlines()) >= 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout
    summary = json.loads(stdout)
    assert summary["stopped"] and 2 <= summary["iteration"] < 8
    assert (out / "last.pth").exists() and not (out / "model_final.pth").exists()
    done = subprocess.run(
        [*args, "--resume"], cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["iteration"] == 8
    reference = tiny_config(tmp_path, "reference", solver__iterations=8)
    run_training(reference, install_signals=False)
    assert losses(out) == losses(Path(reference.output.dir))
    a, b = weights(out / "model_final.pth"), weights(Path(reference.output.dir) / "model_final.pth")
    assert all(torch.equal(a[k], b[k]) for k in a)
