"""Association costs and optimal assignment.

* :func:`box_iou` — pairwise IoU of xyxy boxes (numpy, vectorised).
* :class:`MaskGrid` — masks reduced to a coarse grid once per frame, and
  :func:`mask_iou` — pairwise IoU of grid masks, computed only for pairs
  whose boxes overlap, with each track's mask shifted by its predicted
  motion.
* :func:`assign` — optimal one-to-one assignment above a least IoU
  (``scipy.optimize.linear_sum_assignment``), split into independent
  groups of overlapping pairs so its cost stays small with many objects.
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

__all__ = ["MaskGrid", "assign", "box_iou", "mask_iou"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def box_iou(a: F64, b: F64) -> F64:
    """IoU ``(N, M)`` of ``a (N, 4)`` and ``b (M, 4)`` xyxy boxes (0 for empty boxes)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    ix1 = np.maximum(a[:, None, 0], b[None, :, 0])
    iy1 = np.maximum(a[:, None, 1], b[None, :, 1])
    ix2 = np.minimum(a[:, None, 2], b[None, :, 2])
    iy2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(ix2 - ix1, 0, None) * np.clip(iy2 - iy1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    out: F64 = np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)
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


def mask_iou(
    track_masks: Tensor,
    shifts: F64,
    det_masks: Tensor,
    candidates: NDArray[np.bool_],
) -> F64:
    """IoU ``(T, D)`` of grid masks, 0 outside ``candidates``.

    Args:
        track_masks: ``(T, h, w)`` bool, each track's last grid mask.
        shifts: ``(T, 2)`` predicted motion since that mask, grid cells (x, y).
        det_masks: ``(D, h, w)`` bool grid masks of the detections.
        candidates: ``(T, D)`` bool, the pairs worth computing (boxes overlap).
    """
    out = np.zeros(candidates.shape)
    ti, di = np.nonzero(candidates)
    if len(ti) == 0:
        return out
    rounded = torch.from_numpy(np.rint(shifts).astype(np.int64))
    used = np.unique(ti)
    moved = _shift(track_masks[used], rounded[used, 0], rounded[used, 1])
    pos = np.searchsorted(used, ti)
    a = moved[torch.from_numpy(pos)]
    b = det_masks[torch.from_numpy(di)]
    inter = (a & b).flatten(1).sum(1).double()
    union = a.flatten(1).sum(1).double() + b.flatten(1).sum(1).double() - inter
    iou = torch.where(union > 0, inter / union.clamp(min=1), torch.zeros_like(inter))
    out[ti, di] = iou.numpy()
    return out


def assign(iou: F64, min_iou: float, cost: F64 | None = None) -> tuple[I64, I64]:
    """Optimal pairs ``(rows, cols)`` maximising IoU among pairs with ``iou >= min_iou``.

    Args:
        iou: ``(T, D)`` IoU of tracks (rows) and detections (columns).
        min_iou: pairs below this are never made.
        cost: optional ``(T, D)`` cost to minimise instead of ``1 - iou``
            (still gated by ``iou``).

    Returns:
        matched track rows and detection columns, int64, same length.
    """
    ok = iou >= min_iou
    if not ok.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cost = 1.0 - iou if cost is None else cost
    rows_all, cols_all = np.nonzero(ok)
    if len(np.unique(rows_all)) == len(rows_all) and len(np.unique(cols_all)) == len(cols_all):
        return rows_all.astype(np.int64), cols_all.astype(np.int64)  # no choice to make
    # Tracks and detections linked by feasible pairs form groups, solved
    # separately: each is small unless objects crowd together.
    t, d = iou.shape
    graph = csr_matrix((np.ones(len(rows_all)), (rows_all, cols_all + t)), shape=(t + d, t + d))
    _, group = connected_components(graph, directed=False)
    pair_group = group[rows_all]
    sizes = np.bincount(pair_group)
    alone = sizes[pair_group] == 1
    out_r: list[I64] = [rows_all[alone]]
    out_c: list[I64] = [cols_all[alone]]
    shared = np.flatnonzero(~alone)
    order = shared[np.argsort(pair_group[shared], kind="stable")]
    bounds = np.flatnonzero(np.diff(pair_group[order])) + 1
    for chunk in np.split(order, bounds) if len(order) else []:
        r, c = rows_all[chunk], cols_all[chunk]
        ur, ri = np.unique(r, return_inverse=True)
        uc, ci = np.unique(c, return_inverse=True)
        sub = np.full((len(ur), len(uc)), 1e6)
        sub[ri, ci] = cost[r, c]
        a, b = linear_sum_assignment(sub)
        good = sub[a, b] < 1e6
        out_r.append(ur[a[good]])
        out_c.append(uc[b[good]])
    return np.concatenate(out_r).astype(np.int64), np.concatenate(out_c).astype(np.int64)
