"""One training iteration's micro-batches, and splitting them when memory runs out.

A micro-batch that does not fit in device memory is run as ``split`` parts
of ``B / split`` images each, whose gradients add up to the same step: each
part's loss is weighted by its share of the micro-batch's images (the
losses are means over the micro-batch), so the effective batch and the
update stay the same up to what the losses normalise per micro-batch (the
RPN's and RoI heads' samples are drawn per image, and averaged over the
images of one forward pass). :class:`Trainer` doubles ``split`` each time a
step runs out of memory (:func:`is_out_of_memory`), restarting the
iteration from zero gradients, and keeps it for the rest of the run;
:class:`~streamseg.train.trainer.SplitState` saves it in resumable
checkpoints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

__all__ = ["Part", "is_out_of_memory", "oom_detail", "split_inputs"]

# How the CPU allocator words a failed allocation (torch raises a plain
# RuntimeError there; CUDA's caching allocator raises torch.OutOfMemoryError).
_CPU_OOM = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed memory allocation, on a GPU or on the host."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _CPU_OOM)


def oom_detail(exc: BaseException) -> str:
    """The line of ``exc``'s message that says what could not be allocated."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if any(m in line for m in _CPU_OOM):
            return line  # also inside a data-loader worker's re-raised traceback
    return lines[0] if lines else type(exc).__name__


@dataclasses.dataclass(frozen=True)
class Part:
    """Images ``start .. stop - 1`` of a micro-batch of ``total`` images, as model inputs.

    Attributes:
        index: which part (0 when the micro-batch is not split).
        images: ``float32 (stop - start, 3, H, W)``, a view of the micro-batch's.
        sizes: their unpadded ``(h, w)``.
        targets: their targets.
        weight: ``(stop - start) / total``: the part's share of the micro-batch's loss.
    """

    index: int
    images: Tensor
    sizes: list[tuple[int, int]]
    targets: Any
    weight: float


def split_inputs(inputs: Any, parts: int) -> list[Part]:
    """``(images, image_sizes, targets)`` of one micro-batch as up to ``parts`` parts.

    Parts hold ``ceil(B / parts)`` images (the last fewer); a micro-batch of
    fewer than ``parts`` images gives one part per image.
    """
    images, sizes, targets = inputs
    total = int(images.shape[0])
    step = -(-total // max(1, parts))
    out = []
    for index, start in enumerate(range(0, total, step)):
        stop = min(total, start + step)
        chunk = targets[start:stop] if targets is not None else None
        out.append(
            Part(index, images[start:stop], list(sizes[start:stop]), chunk, (stop - start) / total)
        )
    return out
