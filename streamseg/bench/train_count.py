"""``bench train --count``: what one training iteration asks of a GPU, counted on a CPU.

The iteration of :mod:`streamseg.bench.train` (the trainer's own
``forward``, ``backward``, ``check_losses`` and ``optimizer_step``) runs on
the emulated GPU of :mod:`streamseg.bench.emulated`, the CUDA code path:
torch ops dispatched, kernel launches and host syncs, per phase (``data``:
the micro-batch's copy to the device and its preprocessing there;
``losses``: the loss terms kept per micro-batch and the one read of them
the trainer makes per iteration), with the source line of each sync
(``autograd backward`` for those made in autograd's own thread), and the
device memory: what the weights and the optimiser's state hold between
iterations, and the peak of the iteration.

One untimed iteration runs first (caches, the optimiser's momentum
buffers), then the counted one. Counting runs at a small input (``size``;
the number of ops of a convolution does not depend on its input's size);
the RPN keeps ``proposals`` per image in training (``None``: the model's).
"""

from __future__ import annotations

import dataclasses
import gc
import os
from typing import Any

from streamseg.bench.train import BenchParts, TrainBenchSpec, build_bench

__all__ = ["count_train"]

PHASES = ("data", "forward", "backward", "losses", "optimizer")


def count_train(spec: TrainBenchSpec, *, proposals: int | None = None) -> dict[str, Any]:
    """The counts of one iteration of ``spec`` on the emulated GPU (see the module docstring).

    Returns ``{"benchmark", settings..., "per_iteration": totals, "phases":
    {phase: totals}, "syncs": {site: n}, "top_ops", "memory_mb"}``.
    """
    from streamseg.bench.emulated import EmulationError, emulated_gpu
    from streamseg.models import arch_family

    os.environ.setdefault("TRITON_INTERPRET", "1")
    options = dict(spec.options)
    if proposals is not None and arch_family(spec.arch) == "maskrcnn":
        options["rpn_post_nms_top_n_train"] = proposals
    spec = dataclasses.replace(spec, options=tuple(options.items()), device="emugpu")
    with emulated_gpu() as (device, counts), counts.paused():
        parts = build_bench(spec, device)
        try:
            _iteration(parts, number=0, marks=None, counts=counts)  # warm-up, uncounted
        except RuntimeError as exc:
            if "device_ready_queues_" not in str(exc):
                raise
            raise EmulationError(
                "autograd set up its device threads at this process's first backward pass, "
                "before the emulated GPU existed: count training in a fresh process"
            ) from None
        gc.collect()
        held = counts.memory.in_use  # weights and optimiser state (momentum), no gradients
        counts.clear()
        counts.memory.reset_peak()
        marks: dict[str, dict[str, int]] = {}
        with counts.counting():
            losses = _iteration(parts, number=1, marks=marks, counts=counts)
    totals = counts.totals()
    return {
        "benchmark": "train_count",
        **spec.settings(),
        "input_size": parts.input_size,
        "per_iteration": totals,
        "phases": marks,
        "syncs": dict(counts.sync_sites.most_common()),
        "top_ops": dict(counts.ops.most_common(12)),
        "memory_mb": {
            "model_and_optimizer": round(held / 2**20, 2),
            "peak": round(counts.memory.peak / 2**20, 2),
        },
        "losses": {k: round(v, 5) for k, v in losses.items()},
    }


def _iteration(
    parts: BenchParts, *, number: int, marks: dict[str, dict[str, int]] | None, counts: Any
) -> dict[str, float]:
    """One iteration, the counts of each phase added to ``marks``."""
    from streamseg.train.step import Part

    trainer = parts.trainer

    def phase(name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        before = counts.totals()
        out = fn(*args, **kwargs)
        if marks is not None:
            into = marks.setdefault(name, dict.fromkeys(before, 0))
            for key, value in counts.totals().items():
                into[key] += value - before[key]
        return out

    terms = []
    accumulation = trainer.accumulation
    for k in range(accumulation):
        images, sizes, targets = phase("data", parts.next_inputs)
        part = Part(0, images, sizes, targets, 1.0)
        loss, loss_dict = phase("forward", trainer.forward, number * accumulation + k, part)
        phase("backward", _backward, trainer, loss, accumulation, k == accumulation - 1)
        terms.append(phase("losses", _detached, loss_dict, accumulation))
    losses: dict[str, float] = phase("losses", trainer.check_losses, terms)
    phase("optimizer", trainer.optimizer_step)
    return losses


def _detached(loss_dict: dict[str, Any], accumulation: int) -> dict[str, Any]:
    return {n: v.detach() / accumulation for n, v in loss_dict.items()}


def _backward(trainer: Any, loss: Any, accumulation: int, sync: bool) -> None:
    trainer.backward(loss / accumulation, sync=sync)
