"""Running out of memory ends training with a message naming every memory knob."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from streamseg.train.engine import run_training
from streamseg.train.trainer import HookBase, TrainingError
from tests.support.servers import cli_env
from tests.support.training import tiny_config, tiny_yaml

REPO = Path(__file__).resolve().parents[2]


def _knobs(min_size: str, max_size: str, workers: int) -> list[str]:
    """Each knob as the message shows it, with the tiny config's values."""
    return [
        "solver.batch_size: 2",
        "solver.accumulation: 1",
        f"data.min_size: {min_size}",
        f"data.max_size: {max_size}",
        "model.roi_samples_per_image: 64",
        "solver.precision: fp32",
        "model.freeze_backbone_stages: 0",
        f"data.workers: {workers}",
        "eval.batch_size: 2",
    ]


@pytest.mark.parametrize("workers", [0, 1])
def test_cli_reports_a_real_out_of_memory_with_the_knobs(tmp_path: Path, workers: int) -> None:
    # Training images of 10^7 x 1.5*10^7 pixels: resizing the first one asks the
    # CPU allocator for 1.8 PB, which fails at once (more than any address space),
    # inside the training step (or its data-loader worker).
    path = tmp_path / "huge.yaml"
    path.write_text(tiny_yaml(tmp_path / "run"))
    args = [sys.executable, "-m", "streamseg", "train", str(path), "--threads", "1"]
    sets = ["data.min_size=[10000000]", "data.max_size=20000000", f"data.workers={workers}"]
    for item in sets:
        args += ["--set", item]
    proc = subprocess.run(
        args, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert "streamseg: training failed: out of memory at iteration 0: " in proc.stderr
    assert "DefaultCPUAllocator: can't allocate memory" in proc.stderr
    for knob in _knobs("[10000000]", "20000000", workers):
        assert knob in proc.stderr, knob


class _Raise(HookBase):
    """Raises ``exc`` before iteration ``at``, inside the trainer's loop."""

    def __init__(self, at: int, exc: BaseException) -> None:
        self.at, self.exc = at, exc

    def before_step(self) -> None:
        if self.trainer.iter == self.at:
            raise self.exc


def test_cuda_out_of_memory_gets_the_same_message(tmp_path: Path) -> None:
    # CUDA's caching allocator raises torch.OutOfMemoryError; without a GPU
    # there is no way to get a real one, so the error comes from a hook.
    cfg = tiny_config(tmp_path, "cuda", solver__iterations=3)
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0)")
    with pytest.raises(TrainingError) as info:
        run_training(cfg, install_signals=False, extra_hooks=[_Raise(1, oom)])
    message = str(info.value)
    assert message.startswith("out of memory at iteration 1: CUDA out of memory.")
    for knob in _knobs("[56, 64]", "96", 0):
        assert knob in message, knob
    # Any other error goes through untouched.
    other = tiny_config(tmp_path, "other", solver__iterations=3)
    with pytest.raises(RuntimeError, match=r"^not a memory problem$"):
        run_training(
            other,
            install_signals=False,
            extra_hooks=[_Raise(1, RuntimeError("not a memory problem"))],
        )
