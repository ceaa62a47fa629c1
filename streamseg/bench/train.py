"""Training benchmark: the phases of a training iteration, timed (``streamseg bench train``).

One iteration is what :class:`streamseg.train.trainer.Trainer` runs:
``accumulation`` micro-batches of ``batch`` images, each through *data*
(augmentation, :func:`~streamseg.train.transforms.train_batch`'s resize,
normalisation and copy to the device), *forward* (the model's losses under
autocast), *backward*, then one *optimiser* step (SGD with momentum, the
trainer's default, zeroing the gradients). The phases are the trainer's own
methods (``forward``, ``backward``, ``optimizer_step``), each timed apart,
with a device synchronisation at its end on a GPU.

After ``warmup`` untimed iterations, ``iters`` timed ones give, per phase,
the median wall milliseconds and median CPU milliseconds (process time, all
threads: steadier than wall time on a shared machine); ``images_per_s``
from the median iteration; and the peak memory of the timed iterations:
``max_memory_allocated`` on a GPU, the peak resident set size of the
process on a CPU (its high-water mark is reset after the warm-up through
``/proc/self/clear_refs``, so it is the training step's, not the set-up's).

Images are synthetic scenes of ``size`` (exact ground truth) or those of a
dataset (a COCO JSON or a ``synthetic://`` URL), resized so that the model
input is ``size`` (shorter side ``min(size)``, longer at most ``max(size)``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from streamseg.models.layout import to_channels_last

__all__ = ["TrainBenchSpec", "bench_train", "build_bench", "peak_memory_mb", "reset_peak_memory"]

PHASES = ("data", "forward", "backward", "optimizer")


@dataclasses.dataclass(frozen=True)
class TrainBenchSpec:
    """What to time.

    Attributes:
        arch: a :data:`streamseg.models.ARCHITECTURES` name.
        size: model input ``(h, w)`` (before padding to the size divisibility).
        batch: images per micro-batch.
        accumulation: micro-batches per iteration.
        precision: ``fp32``, ``bf16`` or ``fp16`` (autocast).
        channels_last: the model and its input in channels-last memory format.
        freeze: ``model.freeze_backbone_stages`` (0: the whole backbone trains).
        roi_samples: ``model.roi_samples_per_image`` (``None``: the model's).
        data: a COCO JSON or ``synthetic://`` URL (``None``: synthetic scenes of ``size``).
        device: ``cpu``, ``cuda``, ``cuda:N``.
        iters / warmup: timed and untimed iterations.
        options: further ``build_model`` options.
        tf32: TF32 matmuls and convolutions on NVIDIA GPUs (``solver.tf32``,
            the trainer's default).
    """

    arch: str = "maskrcnn_small"
    size: tuple[int, int] = (360, 640)
    batch: int = 2
    accumulation: int = 1
    precision: str = "fp32"
    channels_last: bool = False
    freeze: int = 0
    roi_samples: int | None = None
    data: str | None = None
    device: str = "cpu"
    iters: int = 5
    warmup: int = 2
    options: tuple[tuple[str, Any], ...] = ()
    tf32: bool = True

    def settings(self) -> dict[str, Any]:
        """The spec as plain data (the report's settings)."""
        out = dataclasses.asdict(self)
        out["size"] = list(self.size)
        out["options"] = dict(self.options)
        return out


@dataclasses.dataclass
class BenchParts:
    """A model ready to train and where its micro-batches come from."""

    trainer: Any  # streamseg.train.trainer.Trainer
    next_inputs: Callable[[], Any]  # -> (images, image_sizes, targets) on the device
    device: torch.device
    input_size: list[int]


def build_bench(spec: TrainBenchSpec, device: torch.device | None = None) -> BenchParts:
    """The model (train mode, on ``device``), optimiser, trainer and a data source for ``spec``."""
    from streamseg.train.config import SolverConfig, TrainModelConfig
    from streamseg.train.datasets import open_dataset, resolve_class_names
    from streamseg.train.modeling import build_train_model, input_spec
    from streamseg.train.solver import build_optimizer, configure_tf32, make_scaler
    from streamseg.train.trainer import Trainer

    device = device if device is not None else torch.device(spec.device)
    configure_tf32(spec.tf32)
    h, w = spec.size
    dataset = open_dataset(spec.data or f"synthetic://?seed=0&width={w}&height={h}&objects=6")
    class_names = resolve_class_names(None, dataset)
    dataset.set_class_names(class_names)
    options = {"min_size": min(spec.size), "max_size": max(spec.size), **dict(spec.options)}
    cfg = TrainModelConfig(
        arch=spec.arch,
        roi_samples_per_image=spec.roi_samples,
        freeze_backbone_stages=spec.freeze,
        options=options,
    )
    torch.manual_seed(0)
    model, _ = build_train_model(cfg, class_names)
    model.to(device)
    if spec.channels_last:
        to_channels_last(model)
    solver = SolverConfig(iterations=1, lr=1e-4, warmup_iters=0)
    optimizer = build_optimizer(model, solver)
    trainer = Trainer(
        model=model,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
        scaler=make_scaler(spec.precision, device.type),
        batches=iter(()),
        accumulation=spec.accumulation,
        max_iter=spec.warmup + spec.iters,
        device=device,
        precision=spec.precision,
        channels_last=spec.channels_last,
    )
    samples = _samples(dataset, spec, input_spec(model))

    def next_inputs() -> Any:
        from streamseg.train.transforms import train_batch

        images, sizes, targets = train_batch([next(samples) for _ in range(spec.batch)],
                                             input_spec(model), device)  # fmt: skip
        if spec.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, sizes, targets

    probe = next_inputs()
    return BenchParts(trainer, next_inputs, device, list(probe[0].shape[-2:]))


def _samples(dataset: Any, spec: TrainBenchSpec, model_spec: Any) -> Iterator[Any]:
    """Augmented samples (flips, the model input ``spec.size``), the dataset in a loop."""
    from streamseg.train.transforms import TrainTransform

    transform = TrainTransform(min_sizes=(min(spec.size),), max_size=max(spec.size))
    indices = [i for i in range(len(dataset)) if dataset.has_instances(i)] or [0]
    position = 0
    while True:
        generator = torch.Generator().manual_seed(position)
        yield transform(dataset[indices[position % len(indices)]], generator)
        position += 1


def bench_train(spec: TrainBenchSpec) -> dict[str, Any]:
    """Time ``spec`` (see the module docstring); the report as plain data."""
    started = time.perf_counter()
    parts = build_bench(spec)
    setup_s = time.perf_counter() - started
    rows: list[dict[str, float]] = []
    losses: dict[str, float] = {}
    for i in range(spec.warmup + spec.iters):
        if i == spec.warmup:
            reset_peak_memory(parts.device)
        row, losses = time_iteration(parts, number=i)
        if i >= spec.warmup:
            rows.append(row)
    return {
        "benchmark": "train",
        **spec.settings(),
        "input_size": parts.input_size,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "setup_s": round(setup_s, 2),
        **summarize(rows, spec.batch * spec.accumulation),
        "peak_memory_mb": peak_memory_mb(parts.device),
        "peak_memory_kind": _memory_kind(parts.device),
        "losses": {k: round(v, 5) for k, v in losses.items()},
    }


def time_iteration(parts: BenchParts, *, number: int) -> tuple[dict[str, float], dict[str, float]]:
    """One iteration, each phase timed: ``{"<phase>_ms", "<phase>_cpu_ms", "total_ms", ...}``
    and the loss terms (read after the timing)."""
    from streamseg.train.step import Part

    trainer, device = parts.trainer, parts.device
    row = {f"{p}_{kind}": 0.0 for p in PHASES for kind in ("ms", "cpu_ms")}
    terms = []

    def timed(phase: str, fn: Callable[[], Any]) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        row[f"{phase}_ms"] += (time.perf_counter() - t0) * 1000
        row[f"{phase}_cpu_ms"] += (time.process_time() - c0) * 1000
        return out

    accumulation = trainer.accumulation
    for k in range(accumulation):
        images, sizes, targets = timed("data", parts.next_inputs)
        part = Part(0, images, sizes, targets, 1.0)
        seed = number * accumulation + k
        loss, loss_dict = timed("forward", functools.partial(trainer.forward, seed, part))
        backward = functools.partial(
            trainer.backward, loss / accumulation, sync=k == accumulation - 1
        )
        timed("backward", backward)
        terms.append({n: v.detach() / accumulation for n, v in loss_dict.items()})
    timed("optimizer", trainer.optimizer_step)
    row["total_ms"] = sum(row[f"{p}_ms"] for p in PHASES)
    row["total_cpu_ms"] = sum(row[f"{p}_cpu_ms"] for p in PHASES)
    return row, trainer.check_losses(terms)


def summarize(rows: list[dict[str, float]], images: int) -> dict[str, Any]:
    """Medians per phase and images/s of timed iterations of ``images`` images each."""
    median = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    total_s = sum(r["total_ms"] for r in rows) / 1000
    return {
        "images_per_iteration": images,
        "images_per_s": round(images / (median["total_ms"] / 1000), 3),
        "images_per_s_mean": round(images * len(rows) / total_s, 3),
        "ms": {p: round(median[f"{p}_ms"], 1) for p in (*PHASES, "total")},
        "cpu_ms": {p: round(median[f"{p}_cpu_ms"], 1) for p in (*PHASES, "total")},
        "iterations_ms": [round(r["total_ms"], 1) for r in rows],
    }


def reset_peak_memory(device: torch.device) -> None:
    """Start the peak of :func:`peak_memory_mb` now."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        return
    # Linux >= 4.0: "5" resets the process's peak resident set size (VmHWM);
    # elsewhere the peak is the process's since it started.
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory_mb(device: torch.device) -> float:
    """``max_memory_allocated`` on a GPU; on a CPU the process's peak resident set size."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _memory_kind(device: torch.device) -> str:
    if device.type == "cuda":
        return "torch.cuda.max_memory_allocated over the timed iterations"
    return "peak resident set size of the process over the timed iterations (VmHWM)"
