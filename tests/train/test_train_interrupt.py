"""``streamseg train`` stopped by a signal saves a resumable checkpoint; --resume finishes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from streamseg.train.engine import run_training
from tests.support.servers import cli_env
from tests.support.training import losses, tiny_config, tiny_yaml, weights

REPO = Path(__file__).resolve().parents[2]


def test_sigterm_saves_and_resume_finishes_the_run(tmp_path: Path) -> None:
    """``streamseg train`` stopped by SIGTERM (a pre-empted pod) resumes to the same weights."""
    path = tmp_path / "cli.yaml"
    out = tmp_path / "cli"
    path.write_text(tiny_yaml(out, iterations=8))
    args = [sys.executable, "-m", "streamseg", "train", str(path), "--threads", "1"]
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
