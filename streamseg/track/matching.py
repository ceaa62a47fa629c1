"""Association costs and optimal assignment.

* :func:`overlap_pairs` — the overlapping pairs of two sets of xyxy boxes
  and their IoU (numpy, sort-and-sweep: cost follows the nearby pairs);
  :func:`box_iou` — the dense ``(N, M)`` matrix from it.
* :class:`MaskGrid` — masks reduced to a coarse grid once per frame, and
  :func:`mask_iou` — pairwise IoU of grid masks, computed only for pairs
  whose boxes overlap, with each track's mask shifted by its predicted
  motion; :func:`grid_iou` — the IoU of given pairs of grid masks.
* :func:`assign` — optimal one-to-one assignment of allowed pairs
  (``scipy.optimize.linear_sum_assignment``) on only the pairs that
  compete, split into independent groups when there are many.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from torch import Tensor

__all__ = ["MaskGrid", "assign", "box_iou", "grid_iou", "mask_iou", "overlap_pairs"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def overlap_pairs(a: F64, b: F64) -> tuple[I64, I64, F64]:
    """The pairs of ``a (N, 4)`` and ``b (M, 4)`` xyxy boxes that overlap, with their IoU.

    Returns ``rows (P,)`` into ``a``, ``cols (P,)`` into ``b`` (int64) and
    ``iou (P,)`` > 0, rows ascending. Sort-and-sweep on x: only pairs whose
    x ranges can meet are looked at, so the cost grows with the number of
    nearby pairs, not with ``N * M``.
    """
    if len(a) == 0 or len(b) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    order = np.argsort(b[:, 0], kind="stable")
    bx1 = b[order, 0]
    widest = max(float((b[:, 2] - b[:, 0]).max()), 0.0)
    # b overlaps a in x only if a.x1 - widest <= b.x1 < a.x2.
    lo = np.searchsorted(bx1, a[:, 0] - widest, side="left")
    hi = np.searchsorted(bx1, a[:, 2], side="left")
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    rows = np.repeat(np.arange(len(a), dtype=np.int64), counts)
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    cols = order[starts + np.arange(total)].astype(np.int64)
    pa, pb = a[rows], b[cols]
    iw = np.minimum(pa[:, 2], pb[:, 2]) - np.maximum(pa[:, 0], pb[:, 0])
    ih = np.minimum(pa[:, 3], pb[:, 3]) - np.maximum(pa[:, 1], pb[:, 1])
    hit = (iw > 0) & (ih > 0)
    rows, cols, pa, pb = rows[hit], cols[hit], pa[hit], pb[hit]
    inter = iw[hit] * ih[hit]
    area_a = (pa[:, 2] - pa[:, 0]) * (pa[:, 3] - pa[:, 1])
    area_b = (pb[:, 2] - pb[:, 0]) * (pb[:, 3] - pb[:, 1])
    union = area_a + area_b - inter
    iou: F64 = inter / np.maximum(union, 1e-12)
    return rows, cols, iou


def box_iou(a: F64, b: F64) -> F64:
    """IoU ``(N, M)`` of ``a (N, 4)`` and ``b (M, 4)`` xyxy boxes (0 for empty boxes)."""
    out = np.zeros((len(a), len(b)))
    rows, cols, iou = overlap_pairs(a, b)
    out[rows, cols] = iou
    return out


class MaskGrid:
    """Frame-resolution masks sampled on a coarse grid (every ``stride`` pixels).

    Args:
        image_size: ``(H, W)`` of the frame, pixels.
        resolution: grid cells on the longer side (the stride is
            ``ceil(max(H, W) / resolution)``).
    """

    def __init__(self, image_size: tuple[int, int], resolution: int) -> None:
        self.stride = max(1, math.ceil(max(image_size) / resolution))

    def reduce(self, masks: Tensor) -> Tensor:
        """``(N, H, W)`` bool -> ``(N, h, w)`` bool on the CPU (one sample per cell)."""
        s = self.stride
        return masks[:, s // 2 :: s, s // 2 :: s].to("cpu", torch.bool).contiguous()


def _shift(masks: Tensor, dx: Tensor, dy: Tensor) -> Tensor:
    """Translate ``(K, h, w)`` bool masks by integer cells ``dx, dy (K,)`` (zeros come in)."""
    k, h, w = masks.shape
    ys = torch.arange(h)[None, :, None] - dy[:, None, None]
    xs = torch.arange(w)[None, None, :] - dx[:, None, None]
    valid = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    rows = torch.arange(k)[:, None, None]
    return masks[rows, ys.clamp(0, h - 1), xs.clamp(0, w - 1)] & valid


def mask_iou(track_masks: Tensor, shifts: F64, det_masks: Tensor, rows: I64, cols: I64) -> F64:
    """IoU ``(P,)`` of the grid-mask pairs ``(rows[p], cols[p])``.

    Args:
        track_masks: ``(T, h, w)`` bool, each track's last grid mask.
        shifts: ``(T, 2)`` predicted motion since that mask, grid cells (x, y).
        det_masks: ``(D, h, w)`` bool grid masks of the detections.
        rows / cols: ``(P,)`` the pairs worth computing (their boxes overlap).
    """
    if len(rows) == 0:
        return np.zeros(0)
    rounded = torch.from_numpy(np.rint(shifts).astype(np.int64))
    used = np.unique(rows)
    moved = _shift(track_masks[torch.from_numpy(used)], rounded[used, 0], rounded[used, 1])
    a = moved[torch.from_numpy(np.searchsorted(used, rows))]
    return grid_iou(a, det_masks[torch.from_numpy(cols)])


def grid_iou(a: Tensor, b: Tensor) -> F64:
    """IoU ``(K,)`` of bool grid masks ``a[k]`` and ``b[k]`` (``(K, h, w)``; 0 when both empty)."""
    inter = (a & b).flatten(1).sum(1).double()
    union = a.flatten(1).sum(1).double() + b.flatten(1).sum(1).double() - inter
    out: F64 = (inter / union.clamp(min=1)).numpy()
    return out


def assign(rows: I64, cols: I64, cost: F64, shape: tuple[int, int]) -> tuple[I64, I64]:
    """Optimal one-to-one pairs among the allowed pairs ``(rows[p], cols[p])``.

    Minimises the total ``cost`` (each ``< LARGE``) of the chosen pairs
    among the assignments with the most pairs. Pairs that compete with no
    other (their row and column each appear once) are taken as they are;
    the rest are solved with ``scipy.optimize.linear_sum_assignment``, all
    at once when small, else per group of linked rows and columns, so the
    cost stays small with many objects.

    Args:
        rows / cols: ``(P,)`` int64 allowed pairs (no duplicates), e.g. the
            tracks and detections whose IoU passed the threshold.
        cost: ``(P,)`` cost of each pair (e.g. ``1 - IoU``).
        shape: ``(T, D)`` number of rows and columns.

    Returns:
        matched rows and columns, int64, same length.
    """
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    row_n = np.bincount(rows, minlength=shape[0])
    col_n = np.bincount(cols, minlength=shape[1])
    alone = (row_n[rows] == 1) & (col_n[cols] == 1)
    if alone.all():
        return rows.astype(np.int64), cols.astype(np.int64)  # no choice to make
    out_r: list[I64] = [rows[alone]]
    out_c: list[I64] = [cols[alone]]
    shared = ~alone
    r, c, k = rows[shared], cols[shared], cost[shared]
    ur, ri = np.unique(r, return_inverse=True)
    uc, ci = np.unique(c, return_inverse=True)
    for a, b in _solve_shared(ri, ci, k, len(ur), len(uc)):
        out_r.append(ur[a])
        out_c.append(uc[b])
    return np.concatenate(out_r).astype(np.int64), np.concatenate(out_c).astype(np.int64)


LARGE = 1e6  # the cost of a pair that is not allowed
DENSE_LIMIT = 96 * 96  # up to this many cells, one dense assignment problem


def _solve_shared(ri: I64, ci: I64, cost: F64, n_rows: int, n_cols: int) -> list[tuple[I64, I64]]:
    """Optimal pairs of compact rows ``0..n_rows-1`` and columns; chosen ``(rows, cols)`` parts.

    Small problems are solved at once. Large ones are split into connected
    groups: a group with one row (or one column) takes its cheapest pair;
    the other groups are packed, whole, into block-diagonal problems of at
    most ``DENSE_LIMIT`` cells (a group larger than that is one problem).
    """
    if n_rows * n_cols <= DENSE_LIMIT:
        return [_dense(ri, ci, cost, n_rows, n_cols)]
    graph = csr_matrix(
        (np.ones(len(ri)), (ri, ci + n_rows)), shape=(n_rows + n_cols, n_rows + n_cols)
    )
    _, label = connected_components(graph, directed=False)
    group = label[ri]
    rows_in = np.bincount(label[:n_rows], minlength=int(label.max()) + 1)
    cols_in = np.bincount(label[n_rows:], minlength=int(label.max()) + 1)
    star = (rows_in[group] == 1) | (cols_in[group] == 1)
    # A one-row (or one-column) group: its cheapest pair.
    s_idx = np.flatnonzero(star)
    order = s_idx[np.lexsort((cost[s_idx], group[s_idx]))]
    first = np.ones(len(order), bool)
    first[1:] = group[order][1:] != group[order][:-1]
    out = [(ri[order[first]], ci[order[first]])]
    rest = np.flatnonzero(~star)
    if len(rest) == 0:
        return out
    ur, rr = np.unique(ri[rest], return_inverse=True)
    uc, cc = np.unique(ci[rest], return_inverse=True)
    if len(ur) * len(uc) <= DENSE_LIMIT:
        a, b = _dense(rr, cc, cost[rest], len(ur), len(uc))
        return [*out, (ur[a], uc[b])]
    # Pack whole groups into block-diagonal problems of at most DENSE_LIMIT cells.
    g = group[rest]
    pack = np.zeros(len(rows_in), np.int64)
    n, size_r, size_c = 0, 0, 0
    for gid in np.unique(g).tolist():
        gr, gc = int(rows_in[gid]), int(cols_in[gid])
        if size_r and (size_r + gr) * (size_c + gc) > DENSE_LIMIT:
            n, size_r, size_c = n + 1, 0, 0
        pack[gid] = n
        size_r, size_c = size_r + gr, size_c + gc
    p = pack[g]
    order = np.argsort(p, kind="stable")
    for chunk in np.split(order, np.flatnonzero(np.diff(p[order])) + 1):
        idx = rest[chunk]
        vr, lr = np.unique(ri[idx], return_inverse=True)
        vc, lc = np.unique(ci[idx], return_inverse=True)
        a, b = _dense(lr, lc, cost[idx], len(vr), len(vc))
        out.append((vr[a], vc[b]))
    return out


def _dense(ri: I64, ci: I64, cost: F64, n_rows: int, n_cols: int) -> tuple[I64, I64]:
    """``linear_sum_assignment`` of the pairs placed in a dense matrix (LARGE elsewhere)."""
    sub = np.full((n_rows, n_cols), LARGE)
    sub[ri, ci] = cost
    a, b = linear_sum_assignment(sub)
    good = sub[a, b] < LARGE
    return a[good].astype(np.int64), b[good].astype(np.int64)
