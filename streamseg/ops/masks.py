"""Mask ops: pasting mask predictions into frames (or box-local crops) and COCO RLE."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from streamseg.ops import _native
from streamseg.ops import reference as _ref
from streamseg.ops import rle as _rle
from streamseg.ops._checks import _check, _check_paste
from streamseg.ops._native import on_gpu
from streamseg.ops._serve import _ANY_FLOAT, kernels_for


def paste_masks(
    masks: Tensor, boxes: Tensor, image_size: tuple[int, int], padding: int = 1
) -> Tensor:
    """Paste per-box mask probabilities into the frame (torchvision's ``paste_masks_in_image``).

    Args:
        masks: ``(N, M, M)`` float probabilities (the mask head's output).
        boxes: ``(N, 4)`` float xyxy frame pixels.
        image_size: frame ``(h, w)``.
        padding: zero border added to the masks before resizing.

    Returns:
        ``(N, h, w)`` float probabilities (0 outside the boxes); threshold
        them (e.g. ``> 0.5``) for bool masks.
    """
    h, w = _check_paste(masks, boxes, image_size)
    kernels = kernels_for(masks, _ANY_FLOAT)
    if kernels is not None and boxes.device == masks.device:
        return kernels.paste_masks(masks, boxes, h, w, int(padding))
    return _ref.paste_masks(masks, boxes, (h, w), int(padding))


def paste_masks_binary(
    masks: Tensor,
    boxes: Tensor,
    image_size: tuple[int, int],
    threshold: float = 0.5,
    padding: int = 1,
) -> Tensor:
    """Paste and threshold in one pass: ``paste_masks(...) > threshold`` without the floats.

    What a detector needs at frame resolution: the native kernel writes one
    byte per pixel instead of a float plane per mask that is then compared.

    Args:
        masks: ``(N, M, M)`` float probabilities.
        boxes: ``(N, 4)`` float xyxy frame pixels.
        image_size: frame ``(h, w)``.
        threshold: a pixel is in the mask when its probability is above this.
        padding: zero border added to the masks before resizing.

    Returns:
        ``(N, h, w)`` bool.
    """
    h, w = _check_paste(masks, boxes, image_size)
    kernels = kernels_for(masks, _ANY_FLOAT)
    if kernels is not None and boxes.device == masks.device:
        return kernels.paste_masks_binary(masks, boxes, h, w, int(padding), float(threshold))
    return _ref.paste_masks_binary(masks, boxes, (h, w), float(threshold), int(padding))


def paste_masks_crops(
    masks: Tensor,
    boxes: Tensor,
    image_size: tuple[int, int],
    threshold: float = 0.5,
    padding: int = 1,
) -> tuple[list[Tensor], Tensor]:
    """:func:`paste_masks_binary` as box-local crops: the work follows the boxes' area.

    Args:
        masks: ``(N, M, M)`` float probabilities.
        boxes: ``(N, 4)`` float xyxy frame pixels.
        image_size: frame ``(h, w)``.
        threshold: a pixel is in the mask when its probability is above
            this; ``>= 0``, so that the mask is empty outside its box.
        padding: zero border added to the masks before resizing.

    Returns:
        ``(crops, regions)``: ``regions`` ``(N, 4)`` int64 ``x0, y0, x1, y1``
        (exclusive, inside the frame: the expanded box the mask is pasted
        on, clipped), ``crops[i]`` bool ``(y1 - y0, x1 - x0)``, equal to
        ``paste_masks_binary(...)[i, y0:y1, x0:x1]``; pass both to
        :func:`crops_to_rle`, or see ``streamseg.types.MaskCrops``.
    """
    h, w = _check_paste(masks, boxes, image_size)
    _check(
        threshold >= 0,
        f"threshold must be >= 0 for crops (got {threshold}): below 0 the whole frame is set",
    )
    packed = _ref.paste_masks_packed if on_gpu(masks) else _ref.paste_masks_packed_loop
    return _ref.paste_masks_crops(
        masks, boxes, (h, w), float(threshold), int(padding), packed=packed
    )


def masks_to_rle(masks: Tensor) -> list[dict[str, Any]]:
    """``(N, h, w)`` bool masks -> COCO compressed RLEs ``{"size": [h, w], "counts": str}``.

    ``counts`` equals ``pycocotools.mask.encode``'s (as ``str``).
    """
    _check(masks.dim() == 3, f"masks must be (N, h, w), got shape {tuple(masks.shape)}")
    kernels = kernels_for(masks, (torch.bool, torch.uint8)) if masks.shape[0] > 0 else None
    if kernels is not None and _native.is_gpu_type(masks.device.type):
        from streamseg.ops.triton import rle as gpu_rle

        # Run boundaries and lengths on the device; only the runs cross to the host.
        return gpu_rle.masks_to_rle(masks)
    if kernels is not None:
        chars, lengths = kernels.mask_to_rle(masks)
        return _split_strings(chars, lengths, [int(masks.shape[1]), int(masks.shape[2])])
    return _ref.masks_to_rle(masks)


def crops_to_rle(
    crops: Sequence[Tensor], boxes: Tensor, image_size: tuple[int, int]
) -> list[dict[str, Any]]:
    """Box-local masks -> the frame-size COCO RLEs of :func:`masks_to_rle`, byte for byte.

    Args:
        crops: ``N`` bool (or 0/1) tensors, ``crops[i]`` of shape
            ``(y1 - y0, x1 - x0)`` for ``boxes[i]``.
        boxes: ``(N, 4)`` integer ``x0, y0, x1, y1`` (exclusive ends)
            inside the frame; the mask is zero outside its box.
        image_size: frame ``(h, w)``.

    Returns:
        ``[{"size": [h, w], "counts": str}]``, what :func:`masks_to_rle`
        gives for the frame-size masks; the work follows the crops' area
        (runs of zeros between a box's columns are counted, not scanned).
    """
    h, w = int(image_size[0]), int(image_size[1])
    _check(
        boxes.dim() == 2 and boxes.shape[1] == 4 and not boxes.dtype.is_floating_point,
        f"boxes must be (N, 4) integers, got shape {tuple(boxes.shape)} {boxes.dtype}",
    )
    _check(
        len(crops) == boxes.shape[0],
        f"crops and boxes must have the same length, got {len(crops)} and {boxes.shape[0]}",
    )
    native = all(c.is_cpu and c.dtype in (torch.bool, torch.uint8) for c in crops)
    if crops and native and _native.enabled("cpu"):
        # One C++ call reads every crop once and writes all strings; it checks
        # each box and crop as below (ValueError with the same message).
        boxes = boxes if boxes.is_cpu else boxes.cpu()
        chars, lengths = torch.ops.streamseg.crops_to_rle(list(crops), boxes, h, w)
        return _split_strings(chars, lengths, [h, w])
    rows = boxes.tolist()
    for i, ((x0, y0, x1, y1), crop) in enumerate(zip(rows, crops, strict=True)):
        _check(
            0 <= x0 <= x1 <= w and 0 <= y0 <= y1 <= h,
            f"boxes[{i}] = {[x0, y0, x1, y1]} is not inside the {h}x{w} frame",
        )
        _check(
            tuple(crop.shape) == (y1 - y0, x1 - x0),
            f"crops[{i}] must be ({y1 - y0}, {x1 - x0}) for its box, got {tuple(crop.shape)}",
        )
    return _rle.crops_to_rle(crops, boxes, (h, w))


def _split_strings(chars: Tensor, lengths: Tensor, size: list[int]) -> list[dict[str, Any]]:
    """The native kernels' packed strings -> ``[{"size": size, "counts": str}]``."""
    text = chars.numpy().tobytes().decode("ascii")
    out = []
    start = 0
    for length in lengths.tolist():
        end = start + length
        out.append({"size": list(size), "counts": text[start:end]})
        start = end
    return out


def mask_to_rle(mask: Tensor) -> dict[str, Any]:
    """``(h, w)`` bool mask -> COCO compressed RLE ``{"size": [h, w], "counts": str}``."""
    _check(mask.dim() == 2, f"mask must be (h, w), got shape {tuple(mask.shape)}")
    return masks_to_rle(mask[None])[0]


def rle_to_mask(rle: dict[str, Any]) -> Tensor:
    """COCO RLE (compressed or list ``counts``) -> ``(h, w)`` bool mask."""
    _check(
        isinstance(rle, dict) and "size" in rle and "counts" in rle,
        "rle must be a dict with 'size' and 'counts'",
    )
    return _ref.rle_to_mask(rle)
