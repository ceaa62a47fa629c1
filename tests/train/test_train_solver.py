"""The optimiser as the loop runs it: learning rates (also after --resume), clipping."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.models import build_model
from streamseg.models.checkpoint import save_checkpoint
from streamseg.train.config import TrainConfig
from streamseg.train.engine import run_training
from tests.support.checkpoints import SMALL_INPUT
from tests.support.training import StopAt, tiny_config, weights

NAMES = ("__background__", "disc", "square", "triangle", "star")
OPTIONS = dict(SMALL_INPUT)


def expected_lr(cfg: TrainConfig, iteration: int) -> float:
    """The documented schedule at 0-based ``iteration``: linear warm-up from
    ``lr * warmup_factor``, times cosine decay to ``lr * min_lr_factor`` or
    ``gamma`` per passed step."""
    s = cfg.solver
    if s.schedule == "cosine":
        progress = min(1.0, iteration / s.iterations)
        factor = s.min_lr_factor + (1 - s.min_lr_factor) * (1 + math.cos(math.pi * progress)) / 2
    elif s.schedule == "step":
        factor = s.gamma ** len([step for step in s.steps if iteration >= step])
    else:
        factor = 1.0
    if iteration < s.warmup_iters:
        alpha = iteration / s.warmup_iters
        factor *= s.warmup_factor + (1 - s.warmup_factor) * alpha
    return s.lr * factor


def _logged(run_dir: Path, key: str) -> dict[int, Any]:
    """``key`` of every training line of metrics.jsonl, by (1-based) iteration."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["iteration"]: r.get(key) for r in rows if "loss" in r}


def _assert_schedule(cfg: TrainConfig) -> None:
    lrs = _logged(Path(cfg.output.dir), "lr")
    assert sorted(lrs) == list(range(1, cfg.solver.iterations + 1))
    for iteration, lr in lrs.items():
        # Line n is the n-th step, taken at 0-based iteration n - 1.
        assert lr == pytest.approx(expected_lr(cfg, iteration - 1), rel=1e-12, abs=0.0), iteration


SCHEDULES = {
    "cosine": {"solver__schedule": "cosine", "solver__min_lr_factor": 0.1},
    "step": {"solver__schedule": "step", "solver__steps": "[5]", "solver__gamma": 0.5},
}


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_learning_rates_follow_warmup_and_schedule_across_a_resume(
    tmp_path: Path, schedule: str
) -> None:
    settings: dict[str, Any] = {
        "frames": 4,
        "solver__iterations": 8,
        "solver__warmup_iters": 4,
        "solver__warmup_factor": 0.1,
        **SCHEDULES[schedule],
    }
    # Stopped inside the warm-up, then resumed to the end.
    cfg = tiny_config(tmp_path, "run", **settings)
    assert run_training(cfg, install_signals=False, extra_hooks=[StopAt(2)]).stopped
    run_training(cfg, resume=True, install_signals=False)
    _assert_schedule(cfg)
    lrs = _logged(Path(cfg.output.dir), "lr")
    assert lrs[1] == pytest.approx(cfg.solver.lr * 0.1) and max(lrs.values()) <= cfg.solver.lr


def test_a_resume_with_a_new_length_and_lr_reshapes_the_schedule_from_there(
    tmp_path: Path,
) -> None:
    settings: dict[str, Any] = {
        "frames": 4,
        "solver__warmup_iters": 2,
        "solver__min_lr_factor": 0.0,
    }
    cfg = tiny_config(tmp_path, "run", solver__iterations=6, **settings)
    assert run_training(cfg, install_signals=False, extra_hooks=[StopAt(4)]).stopped
    # --resume --set solver.iterations=10 --set solver.lr=0.002
    longer = tiny_config(tmp_path, "run", solver__iterations=10, solver__lr=0.002, **settings)
    run_training(longer, resume=True, install_signals=False)
    lrs = _logged(Path(cfg.output.dir), "lr")
    for iteration in range(1, 5):  # before the stop: the 6-iteration schedule
        assert lrs[iteration] == pytest.approx(expected_lr(cfg, iteration - 1), rel=1e-12)
    for iteration in range(5, 11):  # after it the new one, from the first resumed step on
        assert lrs[iteration] == pytest.approx(expected_lr(longer, iteration - 1), rel=1e-12)


def test_gradients_are_clipped_to_clip_grad_norm(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = build_model("maskrcnn_small", class_names=NAMES, **OPTIONS)
    start = tmp_path / "start.pth"
    save_checkpoint(start, model.state_dict(), arch="maskrcnn_small", class_names=list(NAMES))
    clip, lr = 0.01, 1.0
    # Plain SGD (no momentum, no decay, constant LR): one step moves the weights
    # by lr * the clipped gradient, whose norm is exactly clip_grad_norm.
    cfg = tiny_config(
        tmp_path,
        model__weights=str(start),
        solver__iterations=1,
        solver__optimizer="sgd",
        solver__momentum=0.0,
        solver__weight_decay=0.0,
        solver__lr=lr,
        solver__schedule="constant",
        solver__warmup_iters=0,
        solver__clip_grad_norm=clip,
    )
    run_training(cfg, install_signals=False)
    grad_norm = _logged(Path(cfg.output.dir), "grad_norm")[1]
    assert grad_norm > 100 * clip  # the raw gradient is far larger: clipping had work to do
    before, after = weights(start), weights(Path(cfg.output.dir) / "model_final.pth")
    moved = math.sqrt(
        sum(float((after[k].double() - before[k].double()).square().sum()) for k in before)
    )
    assert moved == pytest.approx(lr * clip, rel=1e-3)


def test_sgd_is_fused_on_the_cpu_and_updates_as_the_plain_loop() -> None:
    """``build_optimizer``'s SGD runs torch's fused kernel here (one pass per tensor)
    and moves the weights as the default per-tensor loop does."""
    from streamseg.train.config import SolverConfig
    from streamseg.train.solver import build_optimizer

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))
    twin = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8))
    twin.load_state_dict(model.state_dict())
    cfg = SolverConfig(iterations=1, lr=0.1, momentum=0.9, weight_decay=1e-2, weight_decay_norm=0.0)
    fused = build_optimizer(model, cfg)
    assert all(g["fused"] for g in fused.param_groups)
    decay = [twin[0].weight, twin[0].bias]
    plain = torch.optim.SGD(
        [
            {"params": decay, "weight_decay": 1e-2},
            {"params": list(twin[1].parameters()), "weight_decay": 0.0},
        ],
        lr=0.1,
        momentum=0.9,
        foreach=False,
    )
    x = torch.randn(2, 3, 8, 8)
    for _ in range(3):
        for m, opt in ((model, fused), (twin, plain)):
            opt.zero_grad()
            m(x).square().mean().backward()
            opt.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert not torch.equal(model[0].weight, torch.nn.Conv2d(3, 8, 3).weight)
