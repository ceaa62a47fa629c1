"""The training data loader: micro-batches by position, augmentation seeded per
position, so that resume is exact and ``W`` processes equal one with ``W``-times
accumulation (see ``sampler.py``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from streamseg.train.config import TrainConfig
from streamseg.train.distributed import DistInfo
from streamseg.train.modeling import input_spec
from streamseg.train.sampler import MicroBatchSampler, mix_seed
from streamseg.train.trainer import (
    make_iterator,
)
from streamseg.train.transforms import TrainSample, TrainTransform, train_batch

__all__ = ["TrainingView", "build_loader"]


class TrainingView:
    """Training samples by ``(position, index)``: augmentation seeded per position."""

    def __init__(self, dataset: Any, transform: TrainTransform, seed: int) -> None:
        self.dataset = dataset
        self.transform = transform
        self.seed = seed

    def __getitem__(self, key: tuple[int, int]) -> tuple[int, TrainSample]:
        position, index = key
        generator = torch.Generator().manual_seed(mix_seed(self.seed, 1, position))
        return position, self.transform(self.dataset[index], generator)


def build_loader(
    cfg: TrainConfig,
    info: DistInfo,
    device: torch.device,
    model: nn.Module,
    train_set: Any,
    start_iter: int,
) -> tuple[MicroBatchSampler, Any]:
    spec = input_spec(model)
    indices = [
        i for i in range(len(train_set)) if not cfg.data.skip_empty or train_set.has_instances(i)
    ]
    sampler = MicroBatchSampler(
        indices=indices,
        batch_size=cfg.solver.batch_size,
        world_size=info.world_size,
        rank=info.rank,
        accumulation=cfg.solver.accumulation,
        seed=cfg.solver.seed,
        start_iteration=start_iter,
    )
    transform = TrainTransform(
        min_sizes=tuple(cfg.data.min_size or (spec.min_size,)),
        max_size=cfg.data.max_size or spec.max_size,
        hflip_prob=cfg.data.hflip,
    )
    loader: Any = torch.utils.data.DataLoader(
        TrainingView(train_set, transform, cfg.solver.seed),  # type: ignore[arg-type]
        batch_sampler=sampler,
        num_workers=cfg.data.workers,
        collate_fn=list,
        pin_memory=device.type == "cuda",
        persistent_workers=cfg.data.workers > 0,
    )

    def to_inputs(samples: list[TrainSample]) -> Any:
        return train_batch(samples, spec, device)

    return sampler, make_iterator(loader, to_inputs, cfg.solver.batch_size)
