"""Mask2Former instance inference: queries x classes -> Instances at frame size.

For one image (``Q`` queries, ``K`` classes):

1. class scores ``softmax(logits)[:, :K]`` (the "no object" column dropped);
2. the ``Q`` best (query, class) pairs over all ``Q * K`` (a query may appear
   with several classes);
3. each pair's mask: the query's mask logits, bilinearly upsampled to the
   padded input, cropped to the image, resized to the frame; ``> 0`` is the
   binary mask;
4. score = class score x mask score, where mask score is the mean mask
   probability inside the binary mask;
5. scores ``>= score_threshold``, the ``detections_per_image`` best.

Step 3 is the expensive one, so pairs whose class score is already below the
threshold (the final score can only be lower) are dropped before it, and the
masks of the rest are computed in chunks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from streamseg.types import Instances

__all__ = ["instance_inference", "masks_to_boxes"]

# Masks upsampled to frame resolution at a time (bounds peak memory).
_CHUNK = 16


def masks_to_boxes(masks: Tensor) -> Tensor:
    """Tight ``float32 (N, 4)`` xyxy boxes of ``bool (N, H, W)`` masks (zeros if empty).

    ``x2``/``y2`` are exclusive (one past the last mask pixel), as COCO boxes.
    """
    n = masks.shape[0]
    if n == 0:
        return torch.zeros((0, 4), dtype=torch.float32, device=masks.device)
    rows = masks.any(dim=2)
    cols = masks.any(dim=1)
    h, w = masks.shape[1:]
    ys = torch.arange(h, device=masks.device)
    xs = torch.arange(w, device=masks.device)
    big = max(h, w) + 1
    y1 = torch.where(rows, ys, big).amin(dim=1)
    y2 = torch.where(rows, ys, -1).amax(dim=1) + 1
    x1 = torch.where(cols, xs, big).amin(dim=1)
    x2 = torch.where(cols, xs, -1).amax(dim=1) + 1
    boxes = torch.stack([x1, y1, x2, y2], dim=1).float()
    empty = ~rows.any(dim=1)
    return torch.where(empty[:, None], torch.zeros_like(boxes), boxes)


def _frame_mask_logits(
    mask_logits: Tensor,
    padded_size: tuple[int, int],
    image_size: tuple[int, int],
    frame_size: tuple[int, int],
) -> Tensor:
    """``(n, h4, w4)`` logits -> ``(n, fh, fw)`` float32 logits at frame resolution."""
    x = F.interpolate(
        mask_logits[:, None].float(), size=padded_size, mode="bilinear", align_corners=False
    )
    x = x[:, :, : image_size[0], : image_size[1]]
    if tuple(image_size) != tuple(frame_size):
        x = F.interpolate(x, size=frame_size, mode="bilinear", align_corners=False)
    return x[:, 0]


def instance_inference(
    class_logits: Tensor,
    mask_logits: Tensor,
    *,
    padded_size: tuple[int, int],
    image_size: tuple[int, int],
    frame_size: tuple[int, int],
    score_threshold: float,
    detections_per_image: int,
) -> Instances:
    """Instances of one image from Mask2Former's last-layer outputs.

    Args:
        class_logits: ``(Q, K + 1)``, the last column is "no object".
        mask_logits: ``(Q, h, w)`` at 1/4 of ``padded_size``.
        padded_size: ``(H, W)`` of the padded network input.
        image_size: ``(h, w)`` of the resized image inside it.
        frame_size: ``(h, w)`` of the original frame (output resolution).
        score_threshold / detections_per_image: see the module docstring.

    Returns:
        Instances with labels ``1..K`` (``0`` is background), bool masks.
    """
    num_queries, num_classes = class_logits.shape[0], class_logits.shape[1] - 1
    scores = class_logits.float().softmax(-1)[:, :num_classes].flatten()
    top_scores, top = scores.topk(min(num_queries, scores.numel()))
    keep = top_scores >= score_threshold
    top_scores, top = top_scores[keep], top[keep]
    queries = torch.div(top, num_classes, rounding_mode="floor")
    labels = top % num_classes + 1

    masks = torch.zeros((0, *frame_size), dtype=torch.bool, device=class_logits.device)
    mask_scores = torch.zeros_like(top_scores)
    if len(top):
        unique, inverse = torch.unique(queries, return_inverse=True)
        chunks_masks, chunks_scores = [], []
        for start in range(0, len(unique), _CHUNK):
            logits = _frame_mask_logits(
                mask_logits[unique[start : start + _CHUNK]], padded_size, image_size, frame_size
            )
            binary = logits > 0
            prob_sum = (logits.sigmoid() * binary).flatten(1).sum(1)
            chunks_scores.append(prob_sum / (binary.flatten(1).sum(1) + 1e-6))
            chunks_masks.append(binary)
        masks = torch.cat(chunks_masks)[inverse]
        mask_scores = torch.cat(chunks_scores)[inverse]
    final = top_scores * mask_scores
    order = final.argsort(descending=True)
    order = order[final[order] >= score_threshold][:detections_per_image]
    masks = masks[order]
    return Instances(
        image_size=frame_size,
        boxes=masks_to_boxes(masks),
        scores=final[order],
        labels=labels[order].long(),
        masks=masks,
    )
