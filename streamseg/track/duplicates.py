"""Second reports of one object: detections and tracks that copy another.

A detector that suppresses overlaps per class reports an object seen as two
classes twice, at nearly the same place. Only the first report may start a
track (:func:`first_reports`); a copy that grew into a track anyway (it
overlapped less at its start, or the object's track was lost) is found by
overlapping an older track's detection frame after frame (:func:`shadowed`).
Objects that pass or cross each other overlap that much only briefly.

All work on ``close``: the pairs ``(i, j)``, ``i < j``, of a frame's
detections that overlap by ``duplicate_iou`` or more
(:func:`close_detections`).
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from streamseg.track.matching import close_pairs, grid_iou, overlap_pairs

__all__ = ["Pairs", "close_detections", "copies_of", "first_reports", "shadowed"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
Bool = NDArray[np.bool_]
Pairs = tuple[I64, I64]


def close_detections(boxes: F64, grid: Tensor | None, least: float) -> Pairs:
    """Pairs ``(i, j)``, ``i < j``, of ``boxes (N, 4)`` overlapping by ``least`` or more.

    Overlap is box IoU, or with ``grid`` (``(N, h, w)`` bool grid masks)
    grid-mask IoU, computed for the pairs whose boxes overlap.
    """
    if grid is None:
        return close_pairs(boxes, least)
    r, c, _ = overlap_pairs(boxes, boxes)
    upper = (r < c).nonzero()[0]
    r, c = r[upper], c[upper]
    if len(r):
        iou = grid_iou(grid[torch.from_numpy(r)], grid[torch.from_numpy(c)])
        close = (iou >= least).nonzero()[0]
        r, c = r[close], c[close]
    return r, c


def shadowed(det_of: I64, close: Pairs, ids: I64) -> Bool:
    """``(T,)``: the track's detection is close to an older track's (larger id: younger).

    ``det_of (T,)``: each track row's detection this frame (-1: none);
    ``ids (T,)``: the tracks' ids.
    """
    out = np.zeros(len(det_of), bool)
    i, j = close
    if len(i) == 0:
        return out
    track_of = np.full(int(max(i.max(), j.max())) + 1, -1, np.int64)
    rows = (det_of >= 0).nonzero()[0]
    inside = det_of[rows] < len(track_of)
    track_of[det_of[rows[inside]]] = rows[inside]
    ti, tj = track_of[i], track_of[j]
    both = (ti >= 0) & (tj >= 0)
    ti, tj = ti[both], tj[both]
    out[np.where(ids[ti] > ids[tj], ti, tj)] = True
    return out


def first_reports(cands: I64, taken: I64, scores: F64, close: Pairs) -> I64:
    """``cands`` less those close to a ``taken`` detection or to a surer candidate.

    Candidates are taken in order of decreasing score; one close to a
    surer candidate that was kept is dropped. Returns indices ascending.
    """
    i, j = close
    if len(cands) == 0 or len(i) == 0:
        return cands
    n = int(max(i.max(), j.max(), cands.max())) + 1
    is_cand = np.zeros(n, bool)
    is_cand[cands] = True
    is_taken = np.zeros(n, bool)
    is_taken[taken[taken < n]] = True
    # Both directions of each pair: (candidate, other detection).
    a, b = np.concatenate((i, j)), np.concatenate((j, i))
    keep = is_cand[a]
    a, b = a[keep], b[keep]
    free = is_cand.copy()
    free[a[is_taken[b]]] = False
    rank = np.zeros(n, np.int64)  # position in order of decreasing score
    rank[cands[np.argsort(-scores[cands], kind="stable")]] = np.arange(len(cands))
    surer = is_cand[b] & (rank[b] < rank[a])
    a, b = a[surer], b[surer]
    for k in np.argsort(rank[a], kind="stable").tolist():
        if free[b[k]]:
            free[a[k]] = False
    out: I64 = cands[free[cands]]
    return out


def copies_of(taken: Bool, close: Pairs) -> Bool:
    """``(N,)``: the detection is close to a ``taken`` one (a second report of it)."""
    out = np.zeros(len(taken), bool)
    i, j = close
    out[i[taken[j]]] = True
    out[j[taken[i]]] = True
    return out
