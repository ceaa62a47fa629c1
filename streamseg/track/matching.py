"""Association costs and optimal assignment.

* :func:`overlap_pairs` — the overlapping pairs of two sets of xyxy boxes
  and their IoU (numpy; every pair when few, else only nearby ones);
  :func:`close_pairs` — the pairs of one set that overlap by a least IoU;
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
from torch import Tensor

from streamseg.track.pairs import overlap_pairs_native
from streamseg.types import MaskCrops, mask_grid

__all__ = [
    "MaskGrid",
    "assign",
    "box_iou",
    "close_pairs",
    "grid_iou",
    "mask_iou",
    "overlap_pairs",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


_NO_PAIRS = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
DENSE_PAIRS = 128 * 128  # up to this many box pairs, test them all (fewest numpy calls)


def overlap_pairs(a: F64, b: F64) -> tuple[I64, I64, F64]:
    """The pairs of ``a (N, 4)`` and ``b (M, 4)`` xyxy boxes that overlap, with their IoU.

    Returns ``rows (P,)`` into ``a``, ``cols (P,)`` into ``b`` (int64) and
    ``iou (P,)`` > 0, rows ascending. With the native kernels this is one
    C++ call (the sweep by left edge of :func:`streamseg.ops.box_overlap_pairs`,
    columns ascending within a row), made without giving up the GIL
    (:mod:`streamseg.track.pairs`). Without, up to ``DENSE_PAIRS``
    pairs every pair is tested (the same order and floats); beyond, only
    the boxes of ``b`` near each box of ``a`` are (see :func:`_near_pairs`),
    so the cost follows the number of nearby pairs, not ``N * M``.
    """
    if len(a) == 0 or len(b) == 0:
        return _NO_PAIRS
    # One C++ call that keeps the GIL: the same pairs and IoU floats as below.
    native = overlap_pairs_native(a, b)
    if native is not None:
        return native
    if len(a) * len(b) <= DENSE_PAIRS:
        iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
        ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
        rows, cols = np.nonzero((iw > 0) & (ih > 0))
        iw, ih = iw[rows, cols], ih[rows, cols]
    else:
        rows, cols = _near_pairs(a, b)
        iw = np.minimum(a[rows, 2], b[cols, 2]) - np.maximum(a[rows, 0], b[cols, 0])
        ih = np.minimum(a[rows, 3], b[cols, 3]) - np.maximum(a[rows, 1], b[cols, 1])
        hit = ((iw > 0) & (ih > 0)).nonzero()[0]
        rows, cols, iw, ih = rows[hit], cols[hit], iw[hit], ih[hit]
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    iou: F64 = inter / np.maximum(area_a[rows] + area_b[cols] - inter, 1e-12)
    return rows.astype(np.int64), cols.astype(np.int64), iou


def _near_pairs(a: F64, b: F64) -> tuple[I64, I64]:
    """Candidate pairs (a superset of the overlapping ones), rows ascending.

    The boxes of ``b`` are sorted into horizontal strips as tall as the
    tallest of them (by top edge), and by left edge within a strip. A box of
    ``a`` can only meet boxes whose strip lies between its top (less one
    strip) and its bottom, and whose left edge lies in
    ``[a.x1 - widest, a.x2)``: one contiguous run of the sort order per
    strip, found with ``searchsorted``.
    """
    ax1, ay1, ax2, ay2 = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
    bx1, by1 = b[:, 0], b[:, 1]
    tall = max(float((b[:, 3] - by1).max()), 1.0)
    wide = max(float((b[:, 2] - bx1).max()), 0.0)
    x0 = min(float(bx1.min()), float(ax1.min())) - wide - 1.0
    span = max(float(b[:, 2].max()), float(ax2.max())) - x0 + 1.0  # keeps strips apart
    y0 = float(by1.min())
    key = np.floor((by1 - y0) / tall) * span + (bx1 - x0)
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.floor((ay1 - tall - y0) / tall)
    last = np.floor((ay2 - y0) / tall)
    n_strips = int((last - first).max()) + 1
    strip = first[:, None] + np.arange(n_strips)[None, :]  # (N, S)
    lo = np.searchsorted(key, strip * span + (ax1 - wide - x0)[:, None])
    hi = np.searchsorted(key, strip * span + (ax2 - x0)[:, None])
    counts = np.where((strip <= last[:, None]) & (strip >= 0), hi - lo, 0).ravel()
    total = int(counts.sum())
    rows = np.repeat(np.repeat(np.arange(len(a), dtype=np.int64), n_strips), counts)
    starts = lo.ravel() - np.cumsum(counts) + counts
    cols = order[np.repeat(starts, counts) + np.arange(total)]
    return rows, cols


def close_pairs(boxes: F64, min_iou: float) -> tuple[I64, I64]:
    """Pairs ``(i, j)``, ``i < j``, of ``boxes (N, 4)`` xyxy whose IoU is at least ``min_iou > 0``.

    With the native kernels, the pairs of :func:`streamseg.ops.box_overlap_pairs`
    (by ``i``, then ``j``). Without: two boxes overlap that much only if
    their left edges are within ``(1 - min_iou)`` of the wider one's width
    (else even full height overlap leaves too little), so after sorting by
    left edge each box is compared with the few that follow it within that
    distance.
    """
    n = len(boxes)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    native = overlap_pairs_native(boxes, boxes)
    if native is not None:
        # Every overlapping pair from one C++ sweep (GIL held), each pair kept once.
        r, c, v = native
        keep = (r < c) & (v >= min_iou)
        return r[keep], c[keep]
    x1 = boxes[:, 0]
    order = np.argsort(x1, kind="stable")
    sx = x1[order]
    widest = max(float((boxes[:, 2] - x1).max()), 0.0)
    reach = (1.0 - min_iou) * widest * (1 + 1e-9) + 1e-9
    ahead = np.searchsorted(sx, sx + reach, side="right") - np.arange(1, n + 1)
    total = int(ahead.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = np.repeat(np.arange(n), ahead)
    second = first + 1 + np.arange(total) - np.repeat(np.cumsum(ahead) - ahead, ahead)
    i, j = order[first], order[second]
    a, b = boxes[i], boxes[j]
    iw = np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0])
    ih = np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1])
    inter = np.maximum(iw, 0.0) * np.maximum(ih, 0.0)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    close = (inter / np.maximum(area_a + area_b - inter, 1e-12) >= min_iou) & (iw > 0) & (ih > 0)
    i, j = i[close], j[close]
    return np.minimum(i, j).astype(np.int64), np.maximum(i, j).astype(np.int64)


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

    def reduce(self, masks: Tensor | MaskCrops) -> Tensor:
        """``(N, H, W)`` bool or crops -> ``(N, h, w)`` bool on the CPU (one sample per cell)."""
        return mask_grid(masks, self.stride)


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
    ur, ri = _compact(r, shape[0])
    uc, ci = _compact(c, shape[1])
    for a, b in _solve_shared(ri, ci, k, len(ur), len(uc)):
        out_r.append(ur[a])
        out_c.append(uc[b])
    return np.concatenate(out_r).astype(np.int64), np.concatenate(out_c).astype(np.int64)


def _compact(values: I64, n: int) -> tuple[I64, I64]:
    """``np.unique(values, return_inverse=True)`` for ``values`` in ``0..n-1``,
    by a table instead of a sort: the distinct values ascending, and each
    value's position among them."""
    present = np.zeros(n, bool)
    present[values] = True
    position = np.cumsum(present) - 1
    return present.nonzero()[0], position[values]


LARGE = 1e6  # the cost of a pair that is not allowed
DENSE_LIMIT = 96 * 96  # up to this many cells, one dense assignment problem


def _solve_shared(ri: I64, ci: I64, cost: F64, n_rows: int, n_cols: int) -> list[tuple[I64, I64]]:
    """Optimal pairs of compact rows ``0..n_rows-1`` and columns; chosen ``(rows, cols)`` parts.

    Small problems are solved at once. Large ones are split into connected
    groups: a group with one row (or one column) takes its cheapest pair;
    the other groups are packed, whole and in order, into block-diagonal
    problems of about ``DENSE_LIMIT`` cells (a larger group is one problem).
    """
    if n_rows * n_cols <= DENSE_LIMIT:
        return [_dense(ri, ci, cost, n_rows, n_cols)]
    n_groups, label = _components(ri, ci + n_rows, n_rows + n_cols)
    group = label[ri]
    rows_in = np.bincount(label[:n_rows], minlength=n_groups)
    cols_in = np.bincount(label[n_rows:], minlength=n_groups)
    star = (rows_in[group] == 1) | (cols_in[group] == 1)
    # A one-row (or one-column) group: its cheapest pair.
    s_idx = star.nonzero()[0]
    order = s_idx[np.lexsort((cost[s_idx], group[s_idx]))]
    first = np.ones(len(order), bool)
    first[1:] = group[order][1:] != group[order][:-1]
    out = [(ri[order[first]], ci[order[first]])]
    rest = (~star).nonzero()[0]
    if len(rest) == 0:
        return out
    # Pack groups in order: a new problem every ~sqrt(DENSE_LIMIT) rows + columns.
    size = np.where(rows_in > 1, rows_in + cols_in, 0)
    side = max(2 * math.isqrt(DENSE_LIMIT), 1)
    pack = (np.cumsum(size) - size) // side
    # Each row's (and column's) index within its problem; -1: in no problem.
    r_pack = np.full(n_rows, -1, np.int64)
    r_pack[ri[rest]] = pack[group[rest]]
    c_pack = np.full(n_cols, -1, np.int64)
    c_pack[ci[rest]] = pack[group[rest]]
    r_local = _rank_within(r_pack)
    c_local = _rank_within(c_pack)
    p = pack[group[rest]]
    order = rest[np.argsort(p, kind="stable")]
    bounds = np.diff(p[np.argsort(p, kind="stable")]).nonzero()[0] + 1
    for chunk in np.split(order, bounds):
        lr, lc = r_local[ri[chunk]], c_local[ci[chunk]]
        a, b = _dense(lr, lc, cost[chunk], int(lr.max()) + 1, int(lc.max()) + 1)
        picked = chunk[_pairs_at(lr, lc, a, b)]
        out.append((ri[picked], ci[picked]))
    return out


def _components(u: I64, v: I64, n: int) -> tuple[int, I64]:
    """Connected components of the graph on ``n`` nodes with edges ``(u, v)``: count, labels.

    Min-label propagation with pointer jumping (a few rounds of whole-array
    numpy operations); labels are renumbered ``0..count-1`` by first node.
    """
    label = np.arange(n)
    while True:
        low = np.minimum(label[u], label[v])
        new = label.copy()
        np.minimum.at(new, u, low)
        np.minimum.at(new, v, low)
        new = new[new[new]]
        if np.array_equal(new, label):
            break
        label = new
    roots, out = np.unique(label, return_inverse=True)
    return len(roots), out.astype(np.int64)


def _rank_within(key: I64) -> I64:
    """For each element, how many elements before it share its ``key``."""
    order = np.argsort(key, kind="stable")
    sk = key[order]
    start = np.searchsorted(sk, sk, side="left")
    out = np.empty(len(key), np.int64)
    out[order] = np.arange(len(key)) - start
    return out


def _pairs_at(lr: I64, lc: I64, a: I64, b: I64) -> I64:
    """Positions ``k`` with ``(lr[k], lc[k])`` among the chosen ``(a, b)`` (pairs are distinct)."""
    width = int(lc.max()) + 1
    chosen = np.zeros((int(lr.max()) + 1) * width, bool)
    chosen[a * width + b] = True
    return chosen[lr * width + lc].nonzero()[0]


def _dense(ri: I64, ci: I64, cost: F64, n_rows: int, n_cols: int) -> tuple[I64, I64]:
    """``linear_sum_assignment`` of the pairs placed in a dense matrix (LARGE elsewhere)."""
    sub = np.full((n_rows, n_cols), LARGE)
    sub[ri, ci] = cost
    a, b = linear_sum_assignment(sub)
    good = sub[a, b] < LARGE
    return a[good].astype(np.int64), b[good].astype(np.int64)
