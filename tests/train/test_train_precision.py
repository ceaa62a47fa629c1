"""Mixed precision in real runs: bf16 autocast, fp16 with a gradient scaler, TF32 set-up."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.train.checkpointing import read_training_state
from streamseg.train.engine import run_training
from streamseg.train.solver import configure_tf32
from tests.support.training import losses, tiny_config, weights


def _strict_rows(run_dir: Path) -> list[dict[str, Any]]:
    """metrics.jsonl read as standard JSON: NaN / Infinity are not JSON."""

    def reject(name: str) -> Any:
        raise ValueError(f"metrics.jsonl holds {name}, which is not JSON")

    text = (run_dir / "metrics.jsonl").read_text()
    return [json.loads(line, parse_constant=reject) for line in text.splitlines()]


def _float_dtypes(tree: Any) -> set[torch.dtype]:
    """dtypes of every floating-point tensor in a nested checkpoint structure."""
    if isinstance(tree, torch.Tensor):
        return {tree.dtype} if tree.is_floating_point() else set()
    if isinstance(tree, dict):
        return set().union(*(_float_dtypes(v) for v in tree.values()))
    if isinstance(tree, list | tuple):
        return set().union(*(_float_dtypes(v) for v in tree))
    return set()


def test_bf16_autocast_trains_on_the_cpu_with_fp32_checkpoints(tmp_path: Path) -> None:
    fp32 = tiny_config(tmp_path, "fp32", solver__iterations=3)
    run_training(fp32, install_signals=False)
    bf16 = tiny_config(tmp_path, "bf16", solver__iterations=3, solver__precision="bf16")
    run_training(bf16, install_signals=False)
    out = Path(bf16.output.dir)
    rows = losses(out)
    assert len(rows) == 3
    assert all(math.isfinite(v) for r in rows for k, v in r.items() if k != "iteration")
    # Autocast really ran in bfloat16: the same run in fp32 computes other losses.
    assert rows[0]["loss"] != losses(Path(fp32.output.dir))[0]["loss"]
    # Weights, optimiser moments and the exported model stay fp32.
    model, _, state = read_training_state(out / "last.pth")
    assert _float_dtypes(model) == {torch.float32}
    assert _float_dtypes(state["optimizer"]) == {torch.float32}
    assert _float_dtypes(weights(out / "model_final.pth")) == {torch.float32}
    assert state["scaler"] == {}  # no gradient scaler outside fp16


def test_fp16_with_a_gradient_scaler_on_the_cpu(tmp_path: Path) -> None:
    # torch supports fp16 autocast and GradScaler on the CPU, so the trainer
    # takes precision: fp16 there as well (slow, but the same code path as CUDA).
    cfg = tiny_config(tmp_path, solver__iterations=4, solver__precision="fp16")
    run_training(cfg, install_signals=False)
    out = Path(cfg.output.dir)
    rows = [r for r in _strict_rows(out) if "loss" in r]
    assert len(rows) == 4 and all(math.isfinite(r["loss"]) for r in rows)
    # A step whose gradients overflowed is skipped (grad_norm null) and halves
    # the loss scale (65536 at the start, growth only after 2000 good steps).
    skipped = sum(r["grad_norm"] is None for r in rows)
    assert all(r["grad_norm"] is None or r["grad_norm"] > 0 for r in rows)
    model, _, state = read_training_state(out / "last.pth")
    assert state["scaler"]["scale"] == 65536.0 * 0.5**skipped
    assert skipped < 4  # the scaler recovered: some steps were taken
    assert _float_dtypes(model) == {torch.float32}
    assert _float_dtypes(weights(out / "model_final.pth")) == {torch.float32}


def test_a_bf16_run_resumes_in_fp16(tmp_path: Path) -> None:
    # A bf16 run's checkpoint has no gradient-scaler state; fp16 starts a new scaler.
    cfg = tiny_config(tmp_path, solver__iterations=2, solver__precision="bf16")
    run_training(cfg, install_signals=False)
    more = tiny_config(tmp_path, solver__iterations=3, solver__precision="fp16")
    assert run_training(more, resume=True, install_signals=False).iteration == 3
    _, _, state = read_training_state(Path(more.output.dir) / "last.pth")
    assert state["scaler"]["scale"] in (65536.0, 32768.0)  # fresh, maybe halved once


def _precision_flags() -> tuple[str, str]:
    return (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision)


@pytest.mark.parametrize("enabled", [True, False])
def test_tf32_set_up_is_a_no_op_without_cuda(enabled: bool) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: see test_tf32_flags_on_cuda")
    before = _precision_flags()
    configure_tf32(enabled)
    assert _precision_flags() == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="TF32 is a CUDA setting")
def test_tf32_flags_on_cuda() -> None:
    before = _precision_flags()
    try:
        configure_tf32(True)
        assert _precision_flags() == ("tf32", "tf32")
        configure_tf32(False)
        assert _precision_flags() == ("ieee", "ieee")
    finally:
        torch.backends.cuda.matmul.fp32_precision = before[0]
        torch.backends.cudnn.conv.fp32_precision = before[1]  # type: ignore[attr-defined]
