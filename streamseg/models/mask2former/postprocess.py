"""Mask2Former instance inference: queries x classes -> Instances at frame size.

For each image (``Q`` queries, ``K`` classes):

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
threshold (the final score can only be lower) are dropped before it.

:func:`batch_inference` runs these steps for a whole batch at once: no loop
over images, pairs or kept pairs (a chunk loop bounds memory: up to
:data:`MASK_BUDGET` frame pixels of masks at a time, 64 masks of a 1080p
frame; a batch whose frames differ in size is resized once per size). The
host syncs are three: how many pairs pass the threshold, what each image
keeps, and the masks, copied back in one piece.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from streamseg.ops.transfer import to_device
from streamseg.types import Instances

__all__ = ["MASK_BUDGET", "batch_inference", "masks_to_boxes"]

# Frame pixels of masks upsampled at a time (bounds peak memory: 512 MiB of float32).
MASK_BUDGET = 1 << 27


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


def batch_inference(
    class_logits: Tensor,
    mask_logits: Tensor,
    *,
    padded_size: tuple[int, int],
    image_sizes: Sequence[tuple[int, int]],
    frame_sizes: Sequence[tuple[int, int]],
    score_threshold: float,
    detections_per_image: int,
) -> list[Instances]:
    """Instances of each image from Mask2Former's last-layer outputs, on the host.

    Args:
        class_logits: ``(B, Q, K + 1)``, the last column is "no object".
        mask_logits: ``(B, Q, h, w)`` at 1/4 of ``padded_size``.
        padded_size: ``(H, W)`` of the padded network input.
        image_sizes: ``(h, w)`` of each resized image inside it.
        frame_sizes: ``(h, w)`` of each original frame (output resolution).
        score_threshold / detections_per_image: see the module docstring.

    Returns:
        per image, Instances with labels ``1..K`` (``0`` is background),
        bool masks.
    """
    b, k = class_logits.shape[0], class_logits.shape[2] - 1
    scores = class_logits.float().softmax(-1)[..., :k].flatten(1)
    top_scores, top = scores.topk(min(class_logits.shape[1], scores.shape[1]), dim=1)
    q = top.shape[1]
    kept = torch.nonzero(top_scores.flatten() >= score_threshold).squeeze(1)  # host sync
    image = torch.div(kept, q, rounding_mode="floor")
    query = torch.div(top.flatten()[kept], k, rounding_mode="floor")
    sizes = [
        ((int(i[0]), int(i[1])), (int(f[0]), int(f[1])))
        for i, f in zip(image_sizes, frame_sizes, strict=True)
    ]
    groups = list(dict.fromkeys(sizes))
    binary, mask_scores = _masks(mask_logits[image, query], image, padded_size, sizes, groups)
    final = torch.full_like(top_scores, float("-inf")).flatten()
    final[kept] = top_scores.flatten()[kept] * mask_scores
    order = torch.sort(final.view(b, q), dim=1, descending=True, stable=True)
    slots = min(detections_per_image, q)
    chosen = order.indices[:, :slots] + torch.arange(b, device=final.device)[:, None] * q
    filled = order.values[:, :slots] >= score_threshold
    # Where each chosen pair's mask is among the computed ones.
    row = torch.zeros_like(top.flatten())
    row[kept] = torch.arange(kept.shape[0], device=kept.device)
    labels = top.flatten()[chosen] % k + 1
    meta = torch.stack((final[chosen], labels.float(), filled.float()), dim=-1)
    host = meta.double().cpu().numpy()  # host sync: what each image keeps
    masks, boxes = _chosen_masks(host[..., 2] > 0, filled, row[chosen], binary, sizes, groups)
    return [
        Instances(
            image_size=frame,
            boxes=torch.from_numpy(boxes[i]),
            scores=torch.from_numpy(host[i, : len(boxes[i]), 0].astype(np.float32)),
            labels=torch.from_numpy(host[i, : len(boxes[i]), 1].astype(np.int64)),
            masks=torch.from_numpy(masks[i]),
        )
        for i, (_, frame) in enumerate(sizes)
    ]


Sizes = list[tuple[tuple[int, int], tuple[int, int]]]


def _masks(
    logits: Tensor, image: Tensor, padded_size: tuple[int, int], sizes: Sizes, groups: Sizes
) -> tuple[list[Tensor], Tensor]:
    """Binary frame masks of the kept pairs, one ``(n, fh, fw)`` tensor per distinct
    ``(image size, frame size)`` of the batch, and each pair's mask score (from its
    own image's size)."""
    masks, scores = [], logits.new_zeros(logits.shape[0], dtype=torch.float32)
    for image_size, frame_size in groups:  # one per distinct frame size in the batch
        binary, score = _frame_masks(logits, padded_size, image_size, frame_size)
        masks.append(binary)
        if len(groups) == 1:
            return masks, score
        member = torch.tensor([s == (image_size, frame_size) for s in sizes])
        scores = torch.where(to_device(member, logits.device)[image], score, scores)
    return masks, scores


def _frame_masks(
    logits: Tensor,
    padded_size: tuple[int, int],
    image_size: tuple[int, int],
    frame_size: tuple[int, int],
) -> tuple[Tensor, Tensor]:
    """``(n, fh, fw)`` bool masks of ``(n, h4, w4)`` logits and their mask scores."""
    step = max(1, MASK_BUDGET // max(1, frame_size[0] * frame_size[1]))
    binaries, scores = [], []
    for start in range(0, max(logits.shape[0], 1), step):  # one unless masks pass MASK_BUDGET
        part = logits[start : start + step]
        frame = _frame_mask_logits(part, padded_size, image_size, frame_size)
        binary = frame > 0
        prob_sum = (frame.sigmoid() * binary).flatten(1).sum(1)
        scores.append(prob_sum / (binary.flatten(1).sum(1) + 1e-6))
        binaries.append(binary)
    if len(binaries) == 1:
        return binaries[0], scores[0]
    return torch.cat(binaries), torch.cat(scores)


def _chosen_masks(
    filled_host: np.ndarray,
    filled: Tensor,
    rows: Tensor,
    binary: list[Tensor],
    sizes: Sizes,
    groups: Sizes,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each image's chosen masks ``(n, fh, fw)`` and their boxes ``(n, 4)``, from one copy."""
    parts, layout = [], []
    for group, masks in zip(groups, binary, strict=True):
        mine = np.array([s == group for s in sizes])
        take = filled_host & mine[:, None]
        if len(groups) > 1:  # the filled slots of this group's images
            where = filled & to_device(torch.from_numpy(mine), filled.device)[:, None]
        else:
            where = filled
        picked = torch.nonzero_static(where.flatten(), size=int(take.sum())).squeeze(1)
        chosen = masks[rows.flatten()[picked]]
        parts += [
            chosen.flatten().view(torch.uint8),
            masks_to_boxes(chosen).flatten().view(torch.uint8),
        ]
        layout.append((take, group[1]))
    host = torch.cat(parts).cpu().numpy()  # host sync: the masks and their boxes
    out_masks: list[np.ndarray] = [np.zeros((0, *s[1]), dtype=bool) for s in sizes]
    out_boxes: list[np.ndarray] = [np.zeros((0, 4), dtype=np.float32) for _ in sizes]
    start = 0
    for take, (fh, fw) in layout:
        n = int(take.sum())
        masks_np = host[start : start + n * fh * fw].view(bool).reshape(n, fh, fw)
        start += n * fh * fw
        boxes_np = host[start : start + n * 16].view(np.float32).reshape(n, 4)
        start += n * 16
        counts = np.cumsum(np.concatenate(([0], take.sum(axis=1))))
        for i in np.flatnonzero(take.any(axis=1)):
            out_masks[i] = masks_np[counts[i] : counts[i + 1]]
            out_boxes[i] = boxes_np[counts[i] : counts[i + 1]]
    return out_masks, out_boxes
