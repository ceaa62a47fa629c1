"""The data order: DDP equivalence, resume, epochs."""

from __future__ import annotations

import itertools

import pytest

from streamseg.train.sampler import MicroBatchSampler


def _take(sampler: MicroBatchSampler, n: int) -> list[list[tuple[int, int]]]:
    return list(itertools.islice(iter(sampler), n))


@pytest.mark.parametrize(("world", "accum"), [(2, 1), (2, 3), (4, 2)])
def test_ranks_together_see_what_one_process_sees(world: int, accum: int) -> None:
    size, batch, iters = 13, 2, 5
    single = MicroBatchSampler(range(size), batch, accumulation=world * accum, seed=3)
    per_iter_single = _take(single, iters * world * accum)
    ranks = [
        _take(MicroBatchSampler(range(size), batch, world, r, accum, seed=3), iters * accum)
        for r in range(world)
    ]
    for it in range(iters):
        want = per_iter_single[it * world * accum : (it + 1) * world * accum]
        got = [mb for r in range(world) for mb in ranks[r][it * accum : (it + 1) * accum]]
        # Same micro-batches (same composition, not just the same images).
        assert sorted(got) == sorted(want)


def test_resume_is_starting_the_stream_later() -> None:
    full = _take(MicroBatchSampler(range(7), 3, accumulation=2, seed=1), 10)
    resumed = _take(MicroBatchSampler(range(7), 3, accumulation=2, seed=1, start_iteration=2), 6)
    assert resumed == full[4:]


def test_epochs_are_permutations_and_differ() -> None:
    s = MicroBatchSampler([10, 11, 12, 13, 14, 15], 2, seed=0)
    flat = [idx for mb in _take(s, 9) for _, idx in mb]
    first, second, third = flat[:6], flat[6:12], flat[12:18]
    assert sorted(first) == sorted(second) == sorted(third) == [10, 11, 12, 13, 14, 15]
    assert first != second or second != third
    assert [p for mb in _take(s, 3) for p, _ in mb] == list(range(6))
    assert s.epoch_of(3) == 1


def test_no_images_is_an_error() -> None:
    with pytest.raises(ValueError, match="no training images"):
        MicroBatchSampler([], 2)
