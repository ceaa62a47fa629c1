"""Matching boxes to ground truth and sampling training examples.

Both follow the usual Faster R-CNN rules (and torchvision's numbers): a
prediction matches the ground-truth box it overlaps most; IoU below
``low`` makes it background, between ``low`` and ``high`` it is ignored;
optionally every ground-truth box keeps its best predictions as matches.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "BACKGROUND",
    "IGNORE",
    "NEGATIVE",
    "POSITIVE",
    "UNUSED",
    "match",
    "sample_labels",
]

BACKGROUND = -1
IGNORE = -2


def match(iou: Tensor, high: float, low: float, *, allow_low_quality: bool) -> Tensor:
    """Index of the matched ground truth for each prediction.

    Args:
        iou: ``(G, P)`` IoU of ``G >= 1`` ground-truth boxes with ``P`` predictions.
        high / low: IoU thresholds (``low <= high``).
        allow_low_quality: each ground truth also matches the predictions
            with its highest IoU (ties included), even below ``high``.

    Returns:
        ``(P,)`` int64: ground-truth index, :data:`BACKGROUND` (IoU < low) or
        :data:`IGNORE` (low <= IoU < high). No host sync (no boolean indexing).
    """
    vals, best = iou.max(dim=0)
    matches = torch.where(vals < low, BACKGROUND, torch.where(vals < high, IGNORE, best))
    if allow_low_quality:
        top = iou.max(dim=1).values
        matches = torch.where((iou == top[:, None]).any(dim=0), best, matches)
    return matches


POSITIVE, NEGATIVE, UNUSED = 1, 0, -1


def sample_labels(
    labels: Tensor, batch_size: int, positive_fraction: float
) -> tuple[Tensor, Tensor]:
    """Pick at most ``batch_size`` examples, up to ``positive_fraction`` positive, at random.

    As many positives as there are up to ``int(batch_size * positive_fraction)``,
    then negatives up to ``batch_size`` in all (torchvision's rule), drawn from
    the global RNG, in shapes that do not depend on the data: no host sync.

    Args:
        labels: ``(P,)`` ``>= 1`` positive, ``0`` negative, ``< 0`` ignored.

    Returns:
        ``(index, kind)``, both ``(min(batch_size, P),)``: indices into
        ``labels`` and whether each is :data:`POSITIVE`, :data:`NEGATIVE` or
        :data:`UNUSED` (a filler row to leave out). The chosen positives
        come first, then the negatives, then the unused rows.
    """
    count = labels.shape[0]
    rank = torch.rand(count, device=labels.device)
    positive = labels >= 1
    cap = min(int(batch_size * positive_fraction), count)
    # The `cap` positives of lowest rank (rows that are not positive rank last).
    first = torch.where(positive, rank, 2.0).topk(cap, largest=False).indices
    chosen = torch.zeros_like(positive).index_put((first,), positive[first])
    order = torch.where(chosen, 3.0 + rank, torch.where(labels == 0, 1.0 + rank, -1.0))
    top = order.topk(min(batch_size, count))
    kind = torch.where(
        top.values >= 3.0, POSITIVE, torch.where(top.values >= 1.0, NEGATIVE, UNUSED)
    )
    return top.indices, kind
