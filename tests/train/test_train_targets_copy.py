"""A training batch's targets reach the device in one copy (one host sync on a GPU)."""

from __future__ import annotations

import torch

from streamseg.bench.emulated import emulated_gpu
from streamseg.models import InputSpec
from streamseg.train.transforms import TrainSample, train_batch


def _sample(count: int, size: tuple[int, int], seed: int) -> TrainSample:
    g = torch.Generator().manual_seed(seed)
    image = torch.randint(0, 255, (*size, 3), dtype=torch.uint8, generator=g)
    boxes = torch.rand((count, 4), generator=g) * 10
    labels = torch.randint(1, 5, (count,), generator=g)
    masks = torch.rand((count, *size), generator=g) > 0.5
    return TrainSample(image, size, boxes, labels, masks, seed)


def test_targets_are_copied_once_and_arrive_intact() -> None:
    # An image without instances between two with: every view stays aligned.
    samples = [_sample(3, (24, 32), 0), _sample(0, (20, 28), 1), _sample(5, (32, 24), 2)]
    spec = InputSpec(min_size=24, max_size=32)
    with emulated_gpu() as (device, counts):
        counts.clear()
        _, _, targets = train_batch(samples, spec, device)
        copies = {k: v for k, v in counts.sync_sites.items() if "streamseg.train" in k}
        host = [{k: v.cpu() for k, v in t.items()} for t in targets]
    # One copy for the targets of the batch (the images are preprocess's).
    assert list(copies.values()) == [1], copies
    for got, sample in zip(host, samples, strict=True):
        assert torch.equal(got["boxes"], sample.boxes) and got["boxes"].dtype == torch.float32
        assert torch.equal(got["labels"], sample.labels) and got["labels"].dtype == torch.int64
        assert torch.equal(got["masks"], sample.masks.to(torch.uint8))
