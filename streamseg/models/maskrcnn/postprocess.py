"""Mask R-CNN's detections of a batch -> ``Instances`` on the host, in two copies.

torchvision scales each image's boxes to its frame and pastes each mask
into the frame, one image and one mask at a time. Here the whole batch goes
through a fixed sequence of tensor operations, whatever the number of
images or detections:

1. on the device: boxes scaled to frame pixels (torchvision's float32
   ratios), and each slot's paste region (its expanded box in the frame);
2. one copy to the host of every slot's box, score, label, region and
   whether it holds a detection: this sizes the masks;
3. on the device: every mask pasted and thresholded, as box-local crops
   packed in one flat buffer (or as frame-size masks);
4. one copy of the masks to the host, where each frame's ``Instances`` are
   views of the two copies (its crops are views of the flat buffer, made
   when first asked for).

On a GPU these are the batch's last two host syncs; on the CPU the copies
are free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from streamseg import ops
from streamseg.models.maskrcnn.roi_heads import BatchDetections
from streamseg.ops.transfer import to_device
from streamseg.types import Instances, MaskCrops

__all__ = ["to_instances"]

# Columns of the host copy: box (4), score, label, region (4), filled.
_SCORE, _LABEL, _REGION, _FILLED = 4, 5, slice(6, 10), 10


def to_instances(
    dets: BatchDetections,
    image_sizes: Sequence[tuple[int, int]],
    frame_sizes: Sequence[tuple[int, int]],
    *,
    mask_threshold: float,
    mask_crops: bool,
) -> list[Instances]:
    """One :class:`Instances` per image, on the host, boxes in frame pixels.

    Args:
        dets: the model's detections (resized-image pixels).
        image_sizes: ``(h, w)`` of each resized image.
        frame_sizes: ``(H, W)`` of each frame (the output's resolution).
        mask_threshold: a pixel is in a mask when its probability is above.
        mask_crops: masks as :class:`MaskCrops` (box-local crops) instead of
            ``bool (N, H, W)``.
    """
    n, k = dets.filled.shape
    device = dets.boxes.device
    frames = [(int(h), int(w)) for h, w in frame_sizes]
    # torchvision's ratios: float32 frame size / float32 image size.
    ratio = torch.tensor(frames, dtype=torch.float32) / torch.tensor(image_sizes).float()
    ratio = to_device(ratio[:, [1, 0, 1, 0]], device)
    boxes = (dets.boxes.float() * ratio[:, None, :]).reshape(-1, 4)
    per_slot = to_device(torch.tensor(frames), device).repeat_interleave(k, dim=0)
    regions = ops.paste_regions(boxes, dets.mask_probs.shape[-1], per_slot)
    columns = (boxes, dets.scores, dets.labels, regions, dets.filled)
    meta = torch.cat([c.reshape(n * k, -1).double() for c in columns], dim=1)
    host = meta.cpu().numpy()  # host sync: what every slot holds (float64 holds each exactly)
    rows = np.flatnonzero(host[:, _FILLED] > 0)
    count = int(rows.size)
    picked = torch.nonzero_static(dets.filled.reshape(-1), size=count).squeeze(1)
    probs = dets.mask_probs[:count].float()
    masks: list[MaskCrops] | list[Tensor]
    if mask_crops:
        region = host[rows, _REGION].astype(np.int64)
        areas = (region[:, 2] - region[:, 0]) * (region[:, 3] - region[:, 1])
        flat = ops.paste_masks_packed(
            probs, boxes[picked], regions[picked], int(areas.sum()), mask_threshold
        )
        masks = _crops(flat.cpu(), region, areas, rows // k, n, frames)  # host sync: the masks
    else:
        masks = _frame_masks(probs, boxes[picked], rows // k, n, frames, mask_threshold)
    return [_instances(host[rows[rows // k == i]], frames[i], masks[i]) for i in range(n)]


def _instances(host: np.ndarray, frame: tuple[int, int], masks: Tensor | MaskCrops) -> Instances:
    """One image's ``Instances`` from its rows of the host copy."""
    return Instances(
        image_size=frame,
        boxes=torch.from_numpy(host[:, :4].astype(np.float32)),
        scores=torch.from_numpy(host[:, _SCORE].astype(np.float32)),
        labels=torch.from_numpy(host[:, _LABEL].astype(np.int64)),
        masks=masks,
    )


def _crops(
    flat: Tensor,
    region: np.ndarray,
    areas: np.ndarray,
    image: np.ndarray,
    n: int,
    frames: list[tuple[int, int]],
) -> list[MaskCrops]:
    """Each image's crops: its regions and its stretch of the flat buffer."""
    ends = np.cumsum(areas)
    out = []
    for i in range(n):
        mine = np.flatnonzero(image == i)
        lo = int(ends[mine[0]] - areas[mine[0]]) if mine.size else 0
        hi = int(ends[mine[-1]]) if mine.size else 0
        boxes = torch.from_numpy(np.ascontiguousarray(region[mine]))
        out.append(MaskCrops(image_size=frames[i], boxes=boxes.reshape(-1, 4), flat=flat[lo:hi]))
    return out


def _frame_masks(
    probs: Tensor,
    boxes: Tensor,
    image: np.ndarray,
    n: int,
    frames: list[tuple[int, int]],
    threshold: float,
) -> list[Tensor]:
    """Each image's ``bool (Ni, H, W)`` masks, pasted per image, copied back in one piece."""
    counts = np.bincount(image, minlength=n).tolist()
    starts = np.concatenate(([0], np.cumsum(counts))).tolist()
    pasted = [
        ops.paste_masks_binary(probs[a:b], boxes[a:b], frame, threshold).reshape(-1)
        for a, b, frame in zip(starts[:-1], starts[1:], frames, strict=True)
    ]
    flat = torch.cat(pasted).cpu()  # host sync: the masks
    sizes = [c * h * w for c, (h, w) in zip(counts, frames, strict=True)]
    return [
        part.view(c, h, w)
        for part, c, (h, w) in zip(flat.split(sizes), counts, frames, strict=True)
    ]
