"""Batch-wide selection: the first ``k`` kept boxes of each image, boxes clipped per image.

Mask R-CNN keeps, per image, the best boxes that survive class-aware (or
level-aware) NMS: torchvision runs one ``batched_nms`` per image and takes
``keep[:k]``. Here one ``ops.batched_nms`` runs over every image of the
batch at once (the image is part of the group, so images never suppress
each other) and :func:`first_per_group` deals its kept boxes out to the
images, ``k`` slots each, with no step whose count depends on the data and
no host sync: on a GPU the whole selection is a fixed handful of kernels.

The kept boxes of an image come in the order NMS returns them: by
decreasing score, equal scores in input order, as ``batched_nms(...)[:k]``
gives them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from streamseg import ops
from streamseg.ops.transfer import to_device

__all__ = ["clip_per_image", "first_per_group"]


def clip_per_image(boxes: Tensor, image_sizes: Sequence[tuple[int, int]]) -> Tensor:
    """Clamp ``(B, ..., 4)`` xyxy boxes of image ``i`` into ``image_sizes[i]`` (``(h, w)``).

    One size for the whole batch (one camera) clamps with numbers; several
    send a ``(B, 4)`` table with one non-blocking copy (no host sync, see
    :mod:`streamseg.ops.transfer`).
    """
    if len(set(image_sizes)) == 1:
        return ops.clip_boxes(boxes, image_sizes[0])
    table = torch.tensor([[w, h, w, h] for h, w in image_sizes], dtype=boxes.dtype)
    bounds = to_device(table, boxes.device)
    bounds = bounds.view(boxes.shape[0], *([1] * (boxes.dim() - 2)), 4)
    return torch.minimum(boxes.clamp(min=0), bounds)


def first_per_group(keep: Tensor, group: Tensor, num_groups: int, k: int) -> tuple[Tensor, Tensor]:
    """The first ``k`` entries of ``keep`` of each group, as a ``(num_groups, k)`` table.

    Args:
        keep: ``(N,)`` int64 (e.g. the indices NMS kept, best first).
        group: ``(N,)`` int64 group of each entry, ``0 .. num_groups - 1``;
            ``num_groups`` (or more) drops the entry.
        num_groups: how many groups (images).
        k: slots per group.

    Returns:
        ``(table, filled)``: ``table[g, r]`` the ``r``-th entry of ``keep``
        in group ``g`` (``0`` where there is none), ``filled`` bool, the
        same shape, saying which slots hold one. A group's filled slots
        come first.
    """
    n = keep.shape[0]
    order = torch.sort(group, stable=True).indices
    sorted_group = group[order]
    rank = torch.arange(n, device=keep.device) - torch.searchsorted(sorted_group, sorted_group)
    taken = (rank < k) & (sorted_group < num_groups)
    # Entries past their group's k slots, or dropped, all go to one spare slot.
    slot = torch.where(taken, sorted_group * k + rank, num_groups * k)
    table = keep.new_zeros(num_groups * k + 1)
    table[slot] = keep[order]
    filled = torch.zeros(num_groups * k + 1, dtype=torch.bool, device=keep.device)
    filled[slot] = taken
    return table[:-1].view(num_groups, k), filled[:-1].view(num_groups, k)
