"""The order in which training sees its data, designed for exact resume and DDP.

The training stream is a sequence of *positions* 0, 1, 2, ...; position ``p``
is image ``perm_e[p % N]`` where ``e = p // N`` is the epoch and ``perm_e`` a
permutation seeded by ``(seed, e)``. Micro-batch ``m`` holds positions
``m * B .. m * B + B - 1``.

Iteration ``i`` of a run with ``W`` processes and ``A`` accumulation steps
consumes the ``W * A`` micro-batches ``i * W * A .. (i + 1) * W * A - 1``;
process ``r`` takes those with ``m = i * W * A + a * W + r`` for ``a < A``.
With ``W = 1`` and ``A' = W * A`` a single process therefore sees exactly the
same micro-batches at every iteration; and since every micro-batch's random
choices (augmentation, the model's proposal sampling) are seeded from its
position and index alone, the summed gradient, and with it the loss
trajectory, matches up to floating-point summation order.

``torch.utils.data.DistributedSampler`` deals images to ranks one by one
(rank ``r`` gets ``perm[r::W]``), which would give different micro-batches
than one process with accumulation; hence this sampler. Resuming at
iteration ``i`` is starting the stream there: no state beyond ``(seed, i)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import torch

__all__ = ["MicroBatchSampler", "mix_seed"]

_MASK64 = (1 << 63) - 1


def mix_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (splitmix64 over the parts)."""
    x = 0x9E3779B97F4A7C15
    for part in parts:
        x = (x ^ (int(part) & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 27
        x = x * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x & _MASK64


@dataclasses.dataclass
class MicroBatchSampler:
    """Infinite micro-batches of ``(position, index)`` pairs for one process.

    Use as a DataLoader ``batch_sampler``; the dataset receives each pair.

    Attributes:
        indices: dataset indices to draw from (e.g. images with annotations).
        batch_size: images per micro-batch.
        world_size / rank: the process group (1 / 0 without DDP).
        accumulation: micro-batches per process per iteration.
        seed: seeds every epoch's permutation.
        start_iteration: the first iteration to produce (resume).
    """

    indices: Sequence[int]
    batch_size: int
    world_size: int = 1
    rank: int = 0
    accumulation: int = 1
    seed: int = 0
    start_iteration: int = 0

    def __post_init__(self) -> None:
        if not self.indices:
            raise ValueError("no training images (after leaving out those without annotations)")
        self._epoch = -1
        self._perm: list[int] = []

    def micro_batch_ids(self, iteration: int) -> list[int]:
        """Global micro-batch numbers this rank processes at ``iteration``."""
        base = iteration * self.world_size * self.accumulation
        return [base + a * self.world_size + self.rank for a in range(self.accumulation)]

    def epoch_of(self, iteration: int) -> int:
        """The epoch the first image of ``iteration`` belongs to."""
        first = iteration * self.world_size * self.accumulation * self.batch_size
        return first // len(self.indices)

    def micro_batch(self, number: int) -> list[tuple[int, int]]:
        start = number * self.batch_size
        return [(p, self._index_at(p)) for p in range(start, start + self.batch_size)]

    def _index_at(self, position: int) -> int:
        epoch, offset = divmod(position, len(self.indices))
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(mix_seed(self.seed, epoch))
            self._perm = torch.randperm(len(self.indices), generator=g).tolist()
            self._epoch = epoch
        return int(self.indices[self._perm[offset]])

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        iteration = self.start_iteration
        while True:
            for number in self.micro_batch_ids(iteration):
                yield self.micro_batch(number)
            iteration += 1
