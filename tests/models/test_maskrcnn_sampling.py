"""Mask R-CNN's matcher and sampler: torchvision's rules, in shapes that need no host sync."""

from __future__ import annotations

import pytest
import torch

from streamseg.bench.emulated import emulated_gpu
from streamseg.models.maskrcnn.sampling import (
    BACKGROUND,
    IGNORE,
    NEGATIVE,
    POSITIVE,
    UNUSED,
    match,
    sample_labels,
)


def _match_loop(iou: torch.Tensor, high: float, low: float, low_quality: bool) -> list[int]:
    """The rule, one prediction at a time."""
    out = []
    for p in range(iou.shape[1]):
        value, best = iou[:, p].max(), int(iou[:, p].argmax())  # float32, as the thresholds
        m = BACKGROUND if bool(value < low) else IGNORE if bool(value < high) else best
        if low_quality and any(iou[g, p] == iou[g].max() for g in range(iou.shape[0])):
            m = best
        out.append(m)
    return out


@pytest.mark.parametrize("low_quality", [False, True])
def test_match_follows_the_rule(low_quality: bool) -> None:
    g = torch.Generator().manual_seed(0)
    iou = (torch.rand((4, 60), generator=g) ** 3 * 10).round() / 10  # ties included
    got = match(iou, 0.7, 0.3, allow_low_quality=low_quality).tolist()
    assert got == _match_loop(iou, 0.7, 0.3, low_quality)
    assert {BACKGROUND, IGNORE} <= set(got)


# (positives, negatives, ignored, batch, fraction) -> (positives, negatives) sampled
CASES = [
    ((5, 100, 10, 32, 0.25), (5, 27)),  # few positives: negatives fill the batch
    ((50, 100, 10, 32, 0.25), (8, 24)),  # positives capped at batch * fraction
    ((50, 10, 0, 32, 0.25), (8, 10)),  # few negatives: the batch is not filled
    ((3, 4, 5, 32, 0.5), (3, 4)),  # fewer candidates than the batch: unused rows
    ((0, 40, 0, 16, 0.5), (0, 16)),
    ((0, 0, 7, 16, 0.5), (0, 0)),
]


@pytest.mark.parametrize(("counts", "expected"), CASES)
def test_sample_labels_takes_torchvisions_counts(
    counts: tuple[int, int, int, int, float], expected: tuple[int, int]
) -> None:
    pos, neg, ignored, batch, fraction = counts
    labels = torch.cat([torch.full((pos,), 2), torch.zeros(neg), torch.full((ignored,), -1)])
    labels = labels[torch.randperm(len(labels))]
    index, kind = sample_labels(labels, batch, fraction)
    assert len(index) == len(kind) == min(batch, len(labels))
    assert len(set(index.tolist())) == len(index)  # no row twice
    assert ((kind == POSITIVE).sum(), (kind == NEGATIVE).sum()) == expected
    assert bool((labels[index[kind == POSITIVE]] >= 1).all())
    assert bool((labels[index[kind == NEGATIVE]] == 0).all())
    # Positives first, then negatives, then unused rows.
    assert kind.tolist() == sorted(kind.tolist(), reverse=True)
    assert int((kind == UNUSED).sum()) == len(kind) - sum(expected)


def test_sampling_draws_at_random_and_makes_no_host_sync() -> None:
    labels = torch.cat([torch.full((40,), 1), torch.zeros(200)])
    torch.manual_seed(0)
    first = sample_labels(labels, 64, 0.25)[0]
    second = sample_labels(labels, 64, 0.25)[0]
    assert set(first.tolist()) != set(second.tolist())
    with emulated_gpu() as (device, counts):
        on_device = labels.to(device)
        counts.clear()
        iou = torch.rand((3, 240), device=device)
        match(iou, 0.7, 0.3, allow_low_quality=True)
        sample_labels(on_device, 64, 0.25)
        assert counts.totals()["syncs"] == 0, dict(counts.sync_sites)
