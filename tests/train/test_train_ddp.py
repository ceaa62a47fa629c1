"""DistributedDataParallel: two CPU processes on gloo follow one process with 2x accumulation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from streamseg.train.engine import run_training
from tests.support.servers import cli_env, free_port
from tests.support.training import losses, tiny_yaml, weights

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("streamseg.models.maskrcnn.build", reason="Mask R-CNN not merged yet")
ITERATIONS = 4


def test_two_gloo_processes_match_one_process_with_accumulation(tmp_path: Path) -> None:
    ddp_yaml = tmp_path / "ddp.yaml"
    ddp_yaml.write_text(tiny_yaml(tmp_path / "ddp", iterations=ITERATIONS))
    env = cli_env()
    env["OMP_NUM_THREADS"] = "1"
    args = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
        f"--master_port={free_port()}", "-m", "streamseg", "train", str(ddp_yaml),
        "--set", "solver.accumulation=1",
    ]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    from streamseg.train.config import load_train_config

    one_yaml = tmp_path / "one.yaml"
    one_yaml.write_text(tiny_yaml(tmp_path / "one", iterations=ITERATIONS))
    one = load_train_config(one_yaml, ["solver.accumulation=2"])
    run_training(one, install_signals=False)

    ddp_losses, one_losses = losses(tmp_path / "ddp"), losses(tmp_path / "one")
    assert [r["iteration"] for r in ddp_losses] == list(range(1, ITERATIONS + 1))
    for a, b in zip(ddp_losses, one_losses, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), (a["iteration"], key)
    wa = weights(tmp_path / "ddp" / "model_final.pth")
    wb = weights(tmp_path / "one" / "model_final.pth")
    for key in wa:
        torch.testing.assert_close(wa[key], wb[key], rtol=1e-3, atol=1e-5, msg=key)
    # The losses changed between iterations: the comparison is not of a constant.
    assert len({round(r["loss"], 6) for r in one_losses}) == ITERATIONS
