"""From a :class:`TrainConfig` to a finished (or resumable) run.

``run_training(cfg)`` builds the datasets, the model (starting weights, new
class heads, frozen stages), optimiser, schedule, data loader and hooks, runs
the :class:`Trainer` and returns a :class:`TrainResult`. The same code runs
in one process or in each process of a ``torchrun`` group.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from streamseg.configbase.errors import ConfigError, ConfigIssue
from streamseg.models.layout import to_channels_last
from streamseg.train.checkpointing import (
    save_model_checkpoint,
)
from streamseg.train.config import TrainConfig
from streamseg.train.datasets import build_dataset, resolve_class_names
from streamseg.train.distributed import DistInfo, init_from_env, shutdown
from streamseg.train.evaluate import evaluate_model
from streamseg.train.hooks import CheckpointHook, EvalHook, MetricsHook, MetricsLog
from streamseg.train.loader import build_loader
from streamseg.train.modeling import build_train_model, input_spec, model_meta
from streamseg.train.norm_init import init_frozen_norms
from streamseg.train.resume import resume_run
from streamseg.train.sampler import MicroBatchSampler
from streamseg.train.solver import build_optimizer, build_scheduler, configure_tf32, make_scaler
from streamseg.train.trainer import (
    HookBase,
    SplitState,
    Trainer,
    run_with_signals,
)
from streamseg.train.transforms import TrainTransform, train_batch

__all__ = ["TrainResult", "oom_hint", "run_training"]

log = logging.getLogger("streamseg.train")


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """How a run ended: the iteration reached, whether it was stopped early,
    the best value of the eval metric and the last evaluation."""

    out_dir: Path
    iteration: int
    stopped: bool
    best: float | None
    best_iteration: int | None
    eval: dict[str, Any]


def oom_hint(cfg: TrainConfig) -> str:
    """Every config knob that sets how much memory training needs, with its value."""
    s, d, m = cfg.solver, cfg.data, cfg.model
    default = "the model's"
    min_size = list(d.min_size) if d.min_size else default
    roi = m.roi_samples_per_image if m.roi_samples_per_image is not None else default
    precision = (
        "bf16 (or fp16 on a GPU) about halves activation memory"
        if s.precision == "fp32"
        else "already reduced"
    )
    return (
        "The training config's memory knobs (current values; change them in the file "
        "or with --set):\n"
        f"  solver.batch_size: {s.batch_size} -> fewer images per micro-batch;\n"
        f"  solver.accumulation: {s.accumulation} -> raise it as batch_size goes down, "
        f"to keep the effective batch ({s.batch_size * s.accumulation} images per process);\n"
        f"  data.min_size: {min_size}, data.max_size: {d.max_size or default} "
        "-> smaller training images;\n"
        f"  model.roi_samples_per_image: {roi} -> fewer RoIs through the box and mask heads;\n"
        f"  solver.precision: {s.precision} -> {precision};\n"
        f"  model.freeze_backbone_stages: {m.freeze_backbone_stages} -> freeze more stages: "
        "no gradients or optimiser state for them;\n"
        f"  data.workers: {d.workers} -> fewer data-loader processes, each holding "
        "prefetched batches in host memory;\n"
        f"  eval.batch_size: {cfg.eval.batch_size} -> fewer images per forward pass "
        "when evaluating."
    )


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _pick_device(name: str, info: DistInfo) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            issue = ConfigIssue(
                "cuda, but no CUDA device is available", loc=("device",), hint="use device: cpu"
            )
            raise ConfigError("training config", [issue])
        return torch.device("cuda", info.local_rank)
    return torch.device("cpu")


def run_training(
    cfg: TrainConfig,
    *,
    resume: bool = False,
    extra_hooks: Sequence[HookBase] = (),
    install_signals: bool = True,
) -> TrainResult:
    """Train as ``cfg`` says; see the module docstring."""
    device_name = (
        cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    )
    info = init_from_env(device_name)
    try:
        device = _pick_device(cfg.device, info)
        configure_tf32(cfg.solver.tf32)
        out_dir = Path(cfg.output.dir)
        last = out_dir / "last.pth"
        if last.exists() and not resume:
            issue = ConfigIssue(
                f"{out_dir} already holds a run ({last})",
                loc=("output", "dir"),
                hint="pass --resume to continue it or set output.dir to a new folder",
            )
            raise ConfigError("training config", [issue])
        if info.is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "config.json").write_text(json.dumps(cfg.model_dump(mode="json"), indent=2))
        return _run(
            cfg, info, device, out_dir, resume and last.exists(), extra_hooks, install_signals
        )
    finally:
        shutdown(info)


@dataclasses.dataclass
class _Run:
    """The parts of one run that hooks and checkpoints refer to."""

    cfg: TrainConfig
    info: DistInfo
    device: torch.device
    out_dir: Path
    class_names: tuple[str, ...]
    options: dict[str, Any]
    model: nn.Module
    sampler: MicroBatchSampler
    eval_hook: EvalHook | None
    iteration: int = 0

    def meta(self) -> dict[str, Any]:
        latest = self.eval_hook.latest if self.eval_hook is not None else {}
        return model_meta(self.cfg, self.class_names, self.options, self.iteration, latest)

    def data_state(self) -> dict[str, Any]:
        s = self.cfg.solver
        return {
            "iteration": self.iteration,
            "epoch": self.sampler.epoch_of(self.iteration),
            "seed": s.seed,
            "world_size": self.info.world_size,
            "accumulation": s.accumulation,
            "batch_size": s.batch_size,
        }

    def save_best(self, metrics: dict[str, Any]) -> None:
        if self.info.is_main:
            save_model_checkpoint(
                self.out_dir / "best.pth", self.model, {**self.meta(), "metrics": metrics}
            )

    def hooks(self, start_iter: int) -> list[HookBase]:
        cfg, info = self.cfg, self.info
        log_file = self.out_dir / "metrics.jsonl"
        metrics_log = MetricsLog(log_file, truncate_after=start_iter) if info.is_main else None
        hooks: list[HookBase] = [
            MetricsHook(
                metrics_log,
                period=cfg.output.log_period,
                epoch_of=self.sampler.epoch_of,
                progress=cfg.output.progress,
            ),
        ]
        if self.eval_hook is not None:
            self.eval_hook.metrics_log = metrics_log
            self.eval_hook.save_best = self.save_best
            hooks.append(self.eval_hook)
        hooks.append(
            CheckpointHook(
                self.out_dir,
                period=cfg.output.checkpoint_period,
                is_main=info.is_main,
                meta=self.meta,
                data_state=self.data_state,
            )
        )
        return hooks


class _IterationTracker(HookBase):
    """Keeps ``_Run.iteration`` equal to the trainer's (for meta and data state)."""

    def __init__(self, run: _Run) -> None:
        self.run = run

    def before_train(self) -> None:
        self.run.iteration = self.trainer.iter

    def after_step(self) -> None:
        self.run.iteration = self.trainer.iter


def _run(
    cfg: TrainConfig,
    info: DistInfo,
    device: torch.device,
    out_dir: Path,
    resume: bool,
    extra_hooks: Sequence[HookBase],
    install_signals: bool,
) -> TrainResult:
    train_set = build_dataset(cfg.data.train)
    val_set = build_dataset(cfg.data.val) if cfg.data.val else None
    class_names = resolve_class_names(cfg.model.class_names, train_set)
    train_set.set_class_names(class_names)
    if val_set is not None:
        val_set.set_class_names(class_names)
    seed_everything(cfg.solver.seed)  # the initialisation of new layers
    model, options = build_train_model(cfg.model, class_names, load_weights=not resume)
    model.to(device)
    if cfg.solver.channels_last:
        to_channels_last(model)
    if not resume:
        _init_norms(cfg, model, train_set, device)
    optimizer = build_optimizer(model, cfg.solver)
    scheduler = build_scheduler(optimizer, cfg.solver)
    scaler = make_scaler(cfg.solver.precision, device.type)
    start_iter, hook_states = 0, dict[str, Any]()
    if resume:
        start_iter, hook_states = resume_run(
            out_dir / "last.pth", cfg, info, model, optimizer, scheduler, scaler
        )
    sampler, batches = build_loader(cfg, info, device, model, train_set, start_iter)
    eval_hook = _eval_hook(cfg, info, device, model, val_set, class_names)
    run = _Run(cfg, info, device, out_dir, class_names, options, model, sampler, eval_hook)
    hooks = [_IterationTracker(run), SplitState(), *run.hooks(start_iter), *extra_hooks]
    for hook in hooks:
        if type(hook).__name__ in hook_states:
            hook.load_state_dict(hook_states[type(hook).__name__])
    trainer = Trainer(
        model=_wrap_ddp(model, info, device),
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=scaler,
        batches=batches,
        accumulation=cfg.solver.accumulation,
        max_iter=cfg.solver.iterations,
        start_iter=start_iter,
        seed=cfg.solver.seed,
        device=device,
        precision=cfg.solver.precision,
        channels_last=cfg.solver.channels_last,
        clip_grad_norm=cfg.solver.clip_grad_norm,
        dist=info,
        images_per_iter=cfg.solver.batch_size * cfg.solver.accumulation * info.world_size,
        oom_hint=oom_hint(cfg),
        hooks=hooks,
    )
    run_with_signals(trainer, install_signals)
    return TrainResult(
        out_dir=out_dir,
        iteration=trainer.iter,
        stopped=trainer.stopped,
        best=eval_hook.best if eval_hook else None,
        best_iteration=eval_hook.best_iteration if eval_hook else None,
        eval=eval_hook.latest if eval_hook else {},
    )


def _init_norms(cfg: TrainConfig, model: nn.Module, train_set: Any, device: torch.device) -> None:
    """From scratch: frozen batch-norm statistics from the first training images."""
    count = min(cfg.model.init_frozen_norm_images, len(train_set))
    if not count or cfg.model.weights:
        return
    spec = input_spec(model)
    transform = TrainTransform(
        min_sizes=(max(cfg.data.min_size or (spec.min_size,)),),
        max_size=cfg.data.max_size or spec.max_size,
        hflip_prob=0.0,
    )
    generator = torch.Generator().manual_seed(cfg.solver.seed)
    samples = [transform(train_set[i], generator) for i in range(count)]
    images, _, _ = train_batch(samples, spec, device)
    norms = init_frozen_norms(model, images)
    log.info("set the statistics of %d frozen batch norms from %d training images", norms, count)


def _wrap_ddp(model: nn.Module, info: DistInfo, device: torch.device) -> nn.Module:
    if not info.enabled:
        return model
    return nn.parallel.DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        # Detection heads can leave parameters unused in a step (no positive RoI).
        find_unused_parameters=True,
    )


def _eval_hook(
    cfg: TrainConfig,
    info: DistInfo,
    device: torch.device,
    model: nn.Module,
    val_set: Any,
    class_names: tuple[str, ...],
) -> EvalHook | None:
    if val_set is None:
        return None

    def evaluate() -> dict[str, Any]:
        return evaluate_model(
            model,
            val_set,
            class_names,
            batch_size=cfg.eval.batch_size,
            device=device,
            precision=cfg.solver.precision,
            max_images=cfg.data.val_max_images,
        )

    return EvalHook(
        evaluate,
        period=cfg.eval.period,
        metric=cfg.eval.metric,
        is_main=info.is_main,
        metrics_log=None,
        save_best=lambda _: None,
    )
