"""Matching boxes to ground truth and sampling training examples.

Both follow the usual Faster R-CNN rules (and torchvision's numbers): a
prediction matches the ground-truth box it overlaps most; IoU below
``low`` makes it background, between ``low`` and ``high`` it is ignored;
optionally every ground-truth box keeps its best predictions as matches.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["BACKGROUND", "IGNORE", "match", "sample_labels"]

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
        :data:`IGNORE` (low <= IoU < high).
    """
    vals, matches = iou.max(dim=0)
    best = matches.clone()
    matches[vals < low] = BACKGROUND
    matches[(vals >= low) & (vals < high)] = IGNORE
    if allow_low_quality:
        top = iou.max(dim=1).values
        preds = torch.where(iou == top[:, None])[1]
        matches[preds] = best[preds]
    return matches


def sample_labels(
    labels: Tensor,
    batch_size: int,
    positive_fraction: float,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Pick at most ``batch_size`` examples, up to ``positive_fraction`` positive.

    Args:
        labels: ``(P,)`` ``>= 1`` positive, ``0`` negative, ``< 0`` ignored.

    Returns:
        ``(pos, neg)`` int64 indices into ``labels``, chosen at random.
    """
    positive = torch.where(labels >= 1)[0]
    negative = torch.where(labels == 0)[0]
    num_pos = min(positive.numel(), int(batch_size * positive_fraction))
    num_neg = min(negative.numel(), batch_size - num_pos)
    dev = labels.device
    pos = positive[torch.randperm(positive.numel(), generator=generator, device=dev)[:num_pos]]
    neg = negative[torch.randperm(negative.numel(), generator=generator, device=dev)[:num_neg]]
    return pos, neg
