"""Out of device memory, a step is retried with each micro-batch split in two: the same
effective batch and result; the split is kept for the rest of the run and on resume."""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.bench.emulated import emulated_gpu
from streamseg.train.config import TrainModelConfig
from streamseg.train.data import SyntheticDataset
from streamseg.train.engine import run_training
from streamseg.train.modeling import build_train_model, input_spec
from streamseg.train.trainer import HookBase, Trainer, TrainingError
from streamseg.train.transforms import TrainTransform, train_batch
from tests.support.training import SCENE, StopAt, tiny_config

ITERATIONS = 2


class _Record(HookBase):
    """Each iteration's metrics and the split each step ran with; ``splits`` given,
    the split to run each iteration with."""

    def __init__(self, splits: list[int] | None = None) -> None:
        self.metrics: list[dict[str, float]] = []
        self.splits: list[int] = []
        self.plan = splits

    def before_step(self) -> None:
        if self.plan is not None:
            self.trainer.split = self.plan[self.trainer.iter]

    def after_step(self) -> None:
        self.metrics.append(dict(self.trainer.metrics))
        self.splits.append(self.trainer.split)


def _run(
    device: torch.device, memory: Any, splits: list[int] | None = None
) -> tuple[_Record, dict[str, Any], int]:
    """Two iterations of maskrcnn_small on ``device`` (``splits``: parts per micro-batch
    at each); the record, the final weights (host) and the peak device bytes."""
    gc.collect()
    base = memory.in_use
    memory.reset_peak()
    torch.manual_seed(0)
    cfg = TrainModelConfig(
        arch="maskrcnn_small", roi_samples_per_image=32, options={"min_size": 384, "max_size": 576}
    )
    dataset = SyntheticDataset(SCENE, frames=4)
    names = ("__background__", *dataset.native_class_names)
    dataset.set_class_names(names)
    model, _ = build_train_model(cfg, names)
    model.to(device)
    spec = input_spec(model)
    transform = TrainTransform(min_sizes=(384,), max_size=576, hflip_prob=0.0)

    def batches() -> Iterator[tuple[int, Any]]:
        for number in range(ITERATIONS):
            samples = [transform(dataset[2 * number + i], torch.Generator()) for i in (0, 1)]
            yield number, train_batch(samples, spec, device)

    # Plain SGD updates in place: the peak is the forward and backward passes', not
    # the optimiser's temporaries (which a batch of any size needs).
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, foreach=False)
    record = _Record(splits)
    trainer = Trainer(
        model=model,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
        scaler=torch.amp.GradScaler("cpu", enabled=False),
        batches=batches(),
        accumulation=1,
        max_iter=ITERATIONS,
        device=device,
        hooks=[record],
    )
    trainer.train()
    del record.trainer  # the model and its device memory go with the trainer
    weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return record, weights, memory.peak - base


def _capped_runs() -> dict[str, Any]:
    """On the emulated GPU: the peak of whole micro-batches, a run capped below it,
    and the same steps split as the capped run was, uncapped."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("streamseg.train").addHandler(handler)  # one thread: conftest
    with emulated_gpu() as (device, counts), counts.paused():
        memory = counts.memory
        _, _, peak_whole = _run(device, memory, [1] * ITERATIONS)
        # A device too small for 2 images per forward pass. One fits in 0.74 of it:
        # at 384x576 the activations outweigh the gradients that a first part leaves
        # while the second runs (at 192x288 they do not).
        gc.collect()
        memory.limit = memory.in_use + int(0.9 * peak_whole)
        capped, capped_weights, _ = _run(device, memory)
        memory.limit = None
        same, same_weights, _ = _run(device, memory, capped.splits)
    return {
        "warnings": [r.getMessage() for r in records if r.levelno >= logging.WARNING],
        "splits": capped.splits,
        "losses": ([m["loss"] for m in capped.metrics], [m["loss"] for m in same.metrics]),
        "weights": (capped_weights, same_weights),
    }


def test_out_of_memory_on_the_emulated_gpu_splits_and_gives_the_same_result() -> None:
    # A process of its own: autograd sizes its device queues at the process's first
    # backward pass, which must see the emulated GPU.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        out = pool.submit(_capped_runs).result(timeout=600)
    # Out of memory, then split for the rest of the run.
    assert out["splits"][-1] == 2 and out["splits"] == sorted(out["splits"]), out["splits"]
    (warning,) = [w for w in out["warnings"] if "out of memory" in w]
    assert "emugpu out of memory" in warning and "1 images per forward pass" in warning
    # The retried step starts from zero gradients: exactly the run split from the start.
    capped, same = out["losses"]
    assert capped == same and len(set(capped)) == ITERATIONS
    capped_weights, same_weights = out["weights"]
    for key, value in same_weights.items():
        assert torch.equal(capped_weights[key], value), key


class _OutOfMemoryOnce(HookBase):
    """The first forward pass of iteration ``at`` with whole micro-batches raises
    CUDA's out-of-memory error (a CPU run has no device memory to exhaust: the real
    one is the test above)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def before_step(self) -> None:
        trainer = self.trainer
        if trainer.iter != self.at or trainer.split != 1:
            return
        forward: Callable[..., Any] = trainer.forward

        def failing(*args: Any, **kwargs: Any) -> Any:
            if trainer.split == 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return forward(*args, **kwargs)

        trainer.forward = failing  # type: ignore[method-assign]


class _Splits(HookBase):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def after_step(self) -> None:
        self.seen.append(self.trainer.split)


def test_split_is_saved_for_resume_and_one_image_cannot_split(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "run", solver__iterations=4)
    first = _Splits()
    run_training(cfg, install_signals=False, extra_hooks=[_OutOfMemoryOnce(1), first, StopAt(2)])
    assert first.seen == [1, 2]
    state = torch.load(tmp_path / "run" / "last.pth", map_location="cpu", weights_only=True)
    assert state["train_state"]["hooks"]["SplitState"] == {"split": 2}
    resumed = _Splits()
    run_training(cfg, resume=True, install_signals=False, extra_hooks=[resumed])
    assert resumed.seen == [2, 2]
    # Split down to one image per forward pass, running out again stops training.
    one = tiny_config(tmp_path, "one", solver__iterations=2, solver__batch_size=1)
    with pytest.raises(TrainingError, match="out of memory at iteration 0: CUDA out of memory"):
        run_training(one, install_signals=False, extra_hooks=[_OutOfMemoryOnce(0)])
