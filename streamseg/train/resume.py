"""Resuming a run from ``last.pth``: the model, optimiser, schedule position,
scaler, random states and data position, as the config now asks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from torch import nn

from streamseg.models.checkpoint import CheckpointError
from streamseg.train.checkpointing import (
    check_style,
    read_training_state,
    restore_rng,
)
from streamseg.train.config import TrainConfig
from streamseg.train.distributed import DistInfo

__all__ = ["resume_run"]

log = logging.getLogger("streamseg.train")


def resume_run(
    path: Path,
    cfg: TrainConfig,
    info: DistInfo,
    model: nn.Module,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
) -> tuple[int, dict[str, Any]]:
    model_state, meta, state = read_training_state(path)
    if meta.get("arch") != cfg.model.arch:
        raise CheckpointError(
            f"{path} is a {meta.get('arch')!r} run but model.arch is {cfg.model.arch!r}"
        )
    check_style(model, meta, str(path))
    model.load_state_dict(model_state)
    optimizer.load_state_dict(state["optimizer"])
    # The schedule itself comes from the config (so `--set solver.iterations=N` on
    # resume reshapes it); only its position is restored.
    saved_schedule = dict(state["scheduler"])
    saved_schedule["lr_lambdas"] = [None] * len(saved_schedule.get("lr_lambdas", [None]))
    scheduler.load_state_dict(saved_schedule)
    _reapply_schedule(optimizer, scheduler, cfg.solver.lr)
    if state["scaler"]:  # empty when the run was not fp16: a new scaler starts
        scaler.load_state_dict(state["scaler"])
    restore_rng(state["rng"])
    data = state["data"]
    effective = (info.world_size, cfg.solver.accumulation, cfg.solver.batch_size)
    saved = (data["world_size"], data["accumulation"], data["batch_size"])
    if effective != saved or data["seed"] != cfg.solver.seed:
        log.warning(
            "resuming with (processes, accumulation, batch_size, seed) = %s instead of %s: "
            "training goes on, but not in the exact data order of the original run",
            (*effective, cfg.solver.seed),
            (*saved, data["seed"]),
        )
    log.info("resumed from %s at iteration %d (epoch %d)", path, state["iteration"], data["epoch"])
    return int(state["iteration"]), dict(state.get("hooks", {}))


def _reapply_schedule(optimizer: Any, scheduler: Any, lr: float) -> None:
    """Set each group's LR from the config's schedule at the restored position.

    The optimiser state holds the LR the saved run's schedule chose for the
    next step; with a changed ``solver.iterations`` (or ``solver.lr``, or
    warm-up) that value belongs to the old schedule. Unchanged, this computes
    exactly the saved value.
    """
    scheduler.base_lrs = [lr] * len(optimizer.param_groups)
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas, strict=True):
        group["initial_lr"] = lr
        group["lr"] = lr * factor(scheduler.last_epoch)
