"""Class-aware NMS that does only the work the model needs.

Two exact shortcuts over ``ops.batched_nms(boxes, scores, idxs, t)[:top_k]``:

* boxes of different ``idxs`` never suppress each other, so NMS can run per
  group (few groups, e.g. the RPN's FPN levels) on smaller sets;
* greedy NMS visits boxes by decreasing score and each decision depends only
  on higher-scored boxes, so NMS over the ``m`` best boxes returns exactly
  the first kept boxes of NMS over all of them: when only ``top_k`` kept
  boxes are wanted, growing prefixes give the same result for less work.

The kept indices come back by decreasing score, equal scores in input
order, as ``batched_nms`` returns them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from streamseg import ops

__all__ = ["batched_nms_top_k"]

# Split into per-group NMS calls when there are at most this many groups.
_MAX_SPLIT_GROUPS = 8


def _prefix_nms(
    boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float, top_k: int
) -> Tensor:
    n = scores.shape[0]
    order = torch.sort(scores, descending=True, stable=True).indices
    m = min(n, 2 * top_k)
    while True:
        pick = order[:m]
        keep = ops.batched_nms(boxes[pick], scores[pick], idxs[pick], iou_threshold)
        if keep.numel() >= top_k or m == n:
            return pick[keep[:top_k]]
        m = min(n, 2 * m)


def batched_nms_top_k(
    boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float, top_k: int
) -> Tensor:
    """``ops.batched_nms(boxes, scores, idxs, iou_threshold)[:top_k]``, computed lazily.

    Args:
        boxes: ``(N, 4)`` float xyxy pixels.
        scores: ``(N,)``.
        idxs: ``(N,)`` int64 group (class or level); boxes of different
            groups never suppress each other.
        iou_threshold: IoU above which a lower-scored box is dropped.
        top_k: how many kept boxes are needed.

    Returns:
        ``(K,)`` int64 indices into ``boxes``, ``K <= top_k``, by decreasing score.
    """
    n = scores.shape[0]
    if n == 0 or top_k <= 0:
        return torch.zeros(0, dtype=torch.int64, device=boxes.device)
    groups = torch.unique(idxs)
    if groups.numel() == 1 or groups.numel() > _MAX_SPLIT_GROUPS:
        return _prefix_nms(boxes, scores, idxs, iou_threshold, top_k)
    kept = []
    for g in groups:
        members = torch.where(idxs == g)[0]
        kept.append(
            members[
                _prefix_nms(boxes[members], scores[members], idxs[members], iou_threshold, top_k)
            ]
        )
    keep = torch.cat(kept).sort().values  # input order, so that the stable sort keeps ties so
    order = torch.sort(scores[keep], descending=True, stable=True).indices
    return keep[order][:top_k]
