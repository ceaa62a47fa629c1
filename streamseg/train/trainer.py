"""The training loop: a thin loop plus hooks (``before_step`` / ``after_step``).

::

    trainer = Trainer(model=..., optimizer=..., scheduler=..., scaler=...,
                      batches=..., to_inputs=..., max_iter=1000, hooks=[...])
    trainer.train()

One *iteration* is one optimiser step over ``accumulation`` micro-batches.
Before each micro-batch's forward pass the global RNGs are seeded from
``(seed, micro-batch number)``, so the model's own random choices (proposal
sampling, dropout) are the same whichever process runs that micro-batch and
whether or not the run was resumed (see :mod:`streamseg.train.sampler`).
The loss terms are read back to the host once per iteration (one host sync
on a GPU), and checked to be finite before the optimiser steps.

Out of device memory, the iteration starts again with every micro-batch
run in two parts (then four, ...): the same effective batch, kept for the
rest of the run and in resumable checkpoints (:mod:`streamseg.train.step`,
:class:`SplitState`). Out of memory with one image per forward pass, or in
a run of several processes, training stops with a message naming every
memory knob.

Stopping: :meth:`Trainer.request_stop` (called by the SIGINT/SIGTERM handler
of ``streamseg train``, or by a hook) finishes the current iteration, runs
the ``after_train`` hooks (which save a resumable checkpoint) and returns
with ``trainer.stopped`` set.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.segment.precision import autocast
from streamseg.train.distributed import DistInfo, all_reduce_mean
from streamseg.train.sampler import mix_seed
from streamseg.train.step import Part, is_out_of_memory, oom_detail, split_inputs

__all__ = [
    "HookBase",
    "MicroBatch",
    "SplitState",
    "Trainer",
    "TrainingError",
    "is_out_of_memory",
]

log = logging.getLogger("streamseg.train")

# (global micro-batch number, model inputs: images, image_sizes, targets)
MicroBatch = tuple[int, Any]


class TrainingError(RuntimeError):
    """Training cannot go on; the message says what to change."""


class HookBase:
    """Override any of these; ``self.trainer`` is set when registered."""

    trainer: Trainer

    def before_train(self) -> None: ...
    def after_train(self) -> None: ...
    def before_step(self) -> None: ...
    def after_step(self) -> None: ...

    def close(self) -> None:
        """Release what ``before_train`` took; called last, also when training fails."""

    def state_dict(self) -> dict[str, Any]:
        """Plain data saved in resumable checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Trainer:
    """Runs iterations ``start_iter .. max_iter - 1`` and calls the hooks.

    Args:
        model: the model (possibly wrapped in DistributedDataParallel); train
            ``forward(images, image_sizes, targets) -> dict[str, Tensor]``.
        optimizer / scheduler / scaler: stepped once per iteration.
        batches: yields this process's micro-batches as ``(number, inputs)``.
        accumulation: micro-batches per iteration.
        max_iter / start_iter: iteration range.
        seed: base of the per-micro-batch seeds.
        precision: ``fp32`` / ``bf16`` / ``fp16`` (autocast).
        channels_last: give the model its images in channels-last memory format
            (its weights are converted by whoever builds it).
        clip_grad_norm: clip the global gradient norm, or ``None``.
        dist: the process group; losses are averaged over it for logging.
        images_per_iter: images of one iteration over all processes.
        oom_hint: appended to the error when memory runs out (on the GPU or,
            for the CPU allocator and data loading, on the host).
    """

    def __init__(
        self,
        *,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        scaler: torch.amp.GradScaler,
        batches: Iterator[MicroBatch],
        accumulation: int,
        max_iter: int,
        start_iter: int = 0,
        seed: int = 0,
        device: torch.device | None = None,
        precision: str = "fp32",
        channels_last: bool = False,
        clip_grad_norm: float | None = None,
        dist: DistInfo | None = None,
        images_per_iter: int = 1,
        oom_hint: str = "",
        hooks: Sequence[HookBase] = (),
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.scaler = scaler
        self.batches = batches
        self.accumulation = accumulation
        self.max_iter = max_iter
        self.start_iter = start_iter
        self.iter = start_iter
        self.seed = seed
        self.device = device if device is not None else torch.device("cpu")
        self.precision = precision
        self.channels_last = channels_last
        self.clip_grad_norm = clip_grad_norm
        self.dist = dist if dist is not None else DistInfo()
        self.images_per_iter = images_per_iter
        self.oom_hint = oom_hint
        self.hooks: list[HookBase] = []
        self.metrics: dict[str, float] = {}
        self.stopped = False
        self.split = 1  # parts per micro-batch; doubled when memory runs out
        self._stop_requested = False
        self.register_hooks(hooks)

    def register_hooks(self, hooks: Sequence[HookBase]) -> None:
        for hook in hooks:
            hook.trainer = self
            self.hooks.append(hook)

    def request_stop(self) -> None:
        """Stop after the current iteration (a resumable checkpoint is saved)."""
        self._stop_requested = True

    def train(self) -> None:
        """Run to ``max_iter`` or until a stop is requested."""
        log.info("training iterations %d..%d", self.start_iter, self.max_iter)
        try:
            self._call("before_train")
            self._loop()
            self.stopped = self.iter < self.max_iter
            self._call("after_train")
        finally:
            self._call("close")

    def _loop(self) -> None:
        try:
            while self.iter < self.max_iter and not self._stop_requested:
                self._call("before_step")
                self.run_step()
                self.iter += 1
                self._call("after_step")
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            raise TrainingError(
                f"out of memory at iteration {self.iter}: {oom_detail(exc)}\n{self.oom_hint}"
            ) from None

    def _call(self, name: str) -> None:
        for hook in self.hooks:
            getattr(hook, name)()

    @property
    def unwrapped(self) -> nn.Module:
        """The model without its DistributedDataParallel wrapper."""
        return getattr(self.model, "module", self.model)

    def run_step(self) -> None:
        """One optimiser step over ``accumulation`` micro-batches.

        Each micro-batch runs as ``split`` parts; when memory runs out the
        iteration starts again from zero gradients with ``split`` doubled
        (:mod:`streamseg.train.step`), which stays for the rest of the run.
        The losses are read back to the host once per iteration.
        """
        t0 = time.perf_counter()
        data_time = 0.0
        micro: list[MicroBatch] = []
        for _ in range(self.accumulation):
            t_data = time.perf_counter()
            micro.append(next(self.batches))
            data_time += time.perf_counter() - t_data
        while True:
            try:
                terms = self.accumulate(micro)
                sums = self.check_losses(terms)
                break
            except Exception as exc:
                if not self._split_further(exc, micro):
                    raise
        grad_norm = self.optimizer_step()
        lr = float(self.optimizer.param_groups[0]["lr"])
        with warnings.catch_warnings():
            # An fp16 step the gradient scaler skipped makes torch warn that the
            # schedule ran ahead of the optimiser; here the LR is a function of
            # the iteration, so the schedule must advance anyway.
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        metrics = all_reduce_mean(sums, self.dist)
        metrics["loss"] = sum(v for k, v in metrics.items() if k.startswith("loss_"))
        metrics.update(lr=lr, step_time=time.perf_counter() - t0, data_time=data_time)
        if grad_norm is not None:
            metrics["grad_norm"] = grad_norm
        self.metrics = metrics

    def accumulate(self, micro: Sequence[MicroBatch]) -> list[dict[str, Tensor]]:
        """Forward and backward of every part of ``micro``: each part's loss terms
        (detached, on the device, weighted by its share of the iteration)."""
        terms = []
        for position, (number, inputs) in enumerate(micro):
            parts = split_inputs(inputs, self.split)
            for part in parts:
                last = position == len(micro) - 1 and part.index == len(parts) - 1
                weight = part.weight / len(micro)
                loss, loss_dict = self.forward(self._part_seed(number, part.index), part)
                self.backward(loss * weight, sync=last)
                terms.append({name: v.detach() * weight for name, v in loss_dict.items()})
        return terms

    def _part_seed(self, number: int, index: int) -> int:
        """The seed of micro-batch ``number``'s part ``index`` (the micro-batch's own unsplit)."""
        if self.split == 1:
            return mix_seed(self.seed, 2, number)
        return mix_seed(self.seed, 3, number, index)

    def forward(self, seed: int, part: Part) -> tuple[Tensor, dict[str, Tensor]]:
        """The model's losses on ``part`` and their sum, the global RNGs seeded with ``seed``."""
        torch.manual_seed(seed)  # seeds CUDA as well
        images = part.images
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        with autocast(self.device, self.precision):
            loss_dict = self.model(images, part.sizes, part.targets)
        loss = sum(loss_dict.values())
        assert isinstance(loss, Tensor)
        return loss, loss_dict

    def backward(self, loss: Tensor, *, sync: bool = True) -> None:
        """Gradients of ``loss`` (scaled for fp16); DDP reduces them only when ``sync``."""
        no_sync = getattr(self.model, "no_sync", None)
        ctx = no_sync() if (no_sync is not None and not sync) else contextlib.nullcontext()
        with ctx:
            self.scaler.scale(loss).backward()

    def check_losses(self, terms: Sequence[dict[str, Tensor]]) -> dict[str, float]:
        """The iteration's loss terms summed over its parts, read back in one copy.

        Raises:
            TrainingError: a part's loss is not finite (before the optimiser steps).
        """
        names = list(terms[0]) if terms else []
        stacked = torch.stack([torch.stack([t[n].float() for n in names]) for t in terms])
        rows = stacked.cpu().tolist()  # the iteration's one read of the losses
        for row in rows:
            if not all(math.isfinite(v) for v in row):
                found = {_loss_name(n): v for n, v in zip(names, row, strict=True)}
                raise TrainingError(
                    f"the loss is {sum(row)} at iteration {self.iter} ({found}): lower "
                    "solver.lr, raise solver.warmup_iters, set solver.clip_grad_norm, or train "
                    "in fp32"
                )
        return {_loss_name(n): sum(row[i] for row in rows) for i, n in enumerate(names)}

    def _split_further(self, exc: BaseException, micro: Sequence[MicroBatch]) -> bool:
        """After ``exc``: whether to run the iteration again with ``split`` doubled."""
        largest = max(int(inputs[0].shape[0]) for _, inputs in micro)
        if not is_out_of_memory(exc) or self.dist.enabled or self.split >= largest:
            return False
        self.optimizer.zero_grad(set_to_none=True)
        gc.collect()  # the failed attempt's tensors, should a reference cycle hold them
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        self.split *= 2
        images = -(-largest // self.split)
        log.warning(
            "out of memory at iteration %d (%s): from now on %d images per forward pass "
            "(micro-batches split in %d, the effective batch unchanged)",
            self.iter, oom_detail(exc), images, self.split,
        )  # fmt: skip
        return True

    def optimizer_step(self) -> float | None:
        """Clip (when set), step, update the scaler, zero the gradients.

        Returns the gradient norm before clipping (``None`` without clipping)."""
        norm = None
        if self.clip_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)
            params = [p for g in self.optimizer.param_groups for p in g["params"]]
            norm = float(torch.nn.utils.clip_grad_norm_(params, self.clip_grad_norm))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return norm


class SplitState(HookBase):
    """Saves the trainer's ``split`` (parts per micro-batch, after running out of
    memory) in resumable checkpoints, and sets it again on resume."""

    def __init__(self) -> None:
        self._loaded: int | None = None

    def before_train(self) -> None:
        if self._loaded is not None:
            self.trainer.split = self._loaded

    def state_dict(self) -> dict[str, Any]:
        return {"split": self.trainer.split}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._loaded = int(state.get("split", 1))


def _loss_name(key: str) -> str:
    return key if key.startswith("loss") else f"loss_{key}"


def run_with_signals(trainer: Trainer, install: bool = True) -> None:
    """``trainer.train()`` with SIGINT/SIGTERM asking for a clean stop.

    The first signal finishes the iteration and saves; a second SIGINT
    interrupts at once.
    """
    import signal
    import threading

    if not install or threading.current_thread() is not threading.main_thread():
        trainer.train()
        return
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        if trainer._stop_requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        log.warning("signal %d: stopping after this iteration and saving a checkpoint", signum)
        trainer.request_stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    try:
        trainer.train()
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def make_iterator(
    loader: Any, to_inputs: Callable[[list[Any]], Any], batch_size: int
) -> Iterator[MicroBatch]:
    """DataLoader of ``[(position, Sample), ...]`` -> ``(number, inputs)`` pairs."""
    for items in loader:
        number = items[0][0] // batch_size
        yield number, to_inputs([s for _, s in items])
