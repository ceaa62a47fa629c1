"""Greedy NMS in batched tensor expressions (the PyTorch reference of ``nms``/``batched_nms``).

Greedy NMS visits boxes by decreasing score; a box is kept unless a kept,
higher-scored box of its group overlaps it by more than the threshold. The
kept set is the one fixed point of ``keep[j] = not any(keep[i] and
suppresses[i, j] for i before j)`` (the pairs form an acyclic graph), so it
is found by iterating that equation on all boxes at once, starting from
"all kept": the even iterates shrink and the odd ones grow towards it, and a
box's answer is final as soon as its suppressors' are. The number of
iterations is the depth of the chains of boxes that suppress each other
(a box whose only suppressor is itself suppressed, and so on), not the
number of boxes or of kept boxes. Measured: 2 on the detections of the
trained ``maskrcnn_small`` (``models/demo_small.pth``) and 6 on its
proposals; 10 and 12 on the lattice-like proposals and detections of an
untrained R50-FPN, the worst seen.

The work is :data:`ROUNDS` iterations at a time, then a check folded into
the one ``nonzero`` that sizes the result: when the last two iterates
differ, the flag forces more than ``N`` entries, which no result can have,
and the loop goes on with another round (it takes a chain of more than
``ROUNDS`` boxes in which each box's fate waits on the one before).

Only pairs in the same group are looked at: the boxes are sorted by group,
then by score, and each box is paired with the later boxes of its group.
Every pair's IoU is computed with the C++ kernel's formula and operation
order (``0 / 0`` is ``nan``, which never suppresses), so the comparisons
with the threshold agree with it.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["ROUNDS", "batched_nms", "nms"]

# Iterations between two convergence checks (the deepest chain seen needs 12).
ROUNDS = 12


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Indices (int64) of boxes kept by greedy NMS, by decreasing score.

    A box is suppressed by a kept, higher-scored box when their IoU is
    ``> iou_threshold``; equal scores keep their input order.
    """
    return _nms(boxes, scores, None, iou_threshold)


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """NMS run independently per value of ``idxs``; kept indices by decreasing score."""
    return _nms(boxes, scores, idxs, iou_threshold)


def _nms(boxes: Tensor, scores: Tensor, idxs: Tensor | None, iou_threshold: float) -> Tensor:
    n = boxes.shape[0]
    if n == 0:
        return torch.empty(0, dtype=torch.int64, device=boxes.device)
    by_score = torch.sort(scores, descending=True, stable=True).indices
    if idxs is None:
        # One group: every box is paired with every later one.
        rank = torch.arange(n, device=boxes.device)
        first, last = _pairs_all(n, boxes.device)
    else:
        # Group-major, by score within a group (stable: ties keep input order).
        rank = torch.sort(idxs[by_score], stable=True).indices
        first, last = _pairs_in_groups(idxs[by_score][rank])
    ordered = boxes[by_score[rank]]
    suppresses = _iou_pairs(ordered[first], ordered[last]) > iou_threshold
    kept = _fixed_point(first, last, suppresses, n)
    # Back to decreasing score (rank[k] is where box k stands by score).
    return by_score[torch.sort(rank[kept]).values]


def _pairs_all(n: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Every pair ``(i, j)``, ``i < j < n``, as two int64 tensors."""
    i, j = torch.triu_indices(n, n, offset=1, device=device)
    return i, j


def _pairs_in_groups(groups: Tensor) -> tuple[Tensor, Tensor]:
    """Every pair ``(i, j)``, ``i < j``, with ``groups[i] == groups[j]``; ``groups`` sorted."""
    n = groups.shape[0]
    position = torch.arange(n, device=groups.device)
    later = torch.searchsorted(groups, groups, right=True) - position - 1
    total = int(later.sum())  # host sync: the number of pairs sizes what follows
    first = torch.repeat_interleave(position, later, output_size=total)
    start = torch.cumsum(later, 0) - later
    step = torch.arange(total, device=groups.device) - start[first]
    return first, first + 1 + step


def _iou_pairs(a: Tensor, b: Tensor) -> Tensor:
    """IoU of row ``k`` of ``a (P, 4)`` with row ``k`` of ``b``: ``reference.box_iou``'s
    formula, element by element."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, :2], b[:, :2])
    rb = torch.min(a[:, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    return inter / (area_a + area_b - inter)


def _fixed_point(first: Tensor, last: Tensor, suppresses: Tensor, n: int) -> Tensor:
    """Positions (increasing) kept by greedy NMS over ``n`` sorted boxes where box
    ``first[p]`` suppresses box ``last[p]`` when ``suppresses[p]``."""
    keep = torch.ones(n, dtype=torch.bool, device=first.device)
    while True:
        for _ in range(ROUNDS):
            keep = _step(keep, first, last, suppresses)
        again = _step(keep, first, last, suppresses)
        # The flag adds n + 1 entries when the iteration has not settled.
        moving = (again != keep).any().expand(n + 1)
        found = torch.nonzero(torch.cat((again, moving))).squeeze(1)
        if found.shape[0] <= n:
            return found
        keep = again


def _step(keep: Tensor, first: Tensor, last: Tensor, suppresses: Tensor) -> Tensor:
    """One iteration: a box stays when none of the kept boxes suppresses it."""
    hits = torch.zeros(keep.shape[0], dtype=torch.int32, device=keep.device)
    hits.index_add_(0, last, (keep[first] & suppresses).to(torch.int32))
    return hits == 0
