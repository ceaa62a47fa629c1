"""Post-processing ops (NMS, RoIAlign, mask paste, RLE, box coding).

Each public function runs a native kernel when one serves its tensors (the
C++ kernels built from ``ops/csrc`` for CPU tensors, the Triton kernels of
:mod:`streamseg.ops.triton` for CUDA tensors), else the pure-PyTorch
reference in :mod:`streamseg.ops.reference`.
Semantics follow torchvision's ops exactly (see the Ops section of
``docs/architecture.md``). Boxes are ``xyxy`` in pixels with exclusive
``x2``/``y2``; areas have no ``+1``.

Importing this package compiles and loads nothing: the C++ library is
built (or found in the cache), and the Triton kernels imported, on the
first call that can use them.

Example::

    >>> import torch
    >>> from streamseg import ops
    >>> boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]])
    >>> ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
    [0, 2]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from streamseg.ops import _native
from streamseg.ops import reference as _ref
from streamseg.ops import rle as _rle
from streamseg.ops._checks import _check, _check_boxes, _check_paste, _check_scores
from streamseg.ops._native import on_gpu
from streamseg.ops.paste import paste_masks_packed, paste_regions

__all__ = [
    "batched_nms",
    "box_iou",
    "box_overlap_pairs",
    "clip_boxes",
    "crops_to_rle",
    "decode_boxes",
    "encode_boxes",
    "mask_to_rle",
    "masks_to_rle",
    "multiscale_roi_align",
    "native_cpu",
    "nms",
    "on_gpu",
    "paste_masks",
    "paste_masks_binary",
    "paste_masks_crops",
    "paste_masks_packed",
    "paste_regions",
    "reference_ops",
    "remove_small_boxes",
    "rle_to_mask",
    "roi_align",
    "warm_up",
]

BOX_CLAMP = math.log(1000.0 / 16)
Weights = tuple[float, float, float, float]
_FLOAT = (torch.float32, torch.float64)
_ANY_FLOAT = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _kernels(t: Tensor, dtypes: tuple[torch.dtype, ...] = _FLOAT) -> Any:
    """The native op namespace for ``t``'s device and dtype, else ``None`` (reference).

    ``torch.ops.streamseg`` (C++) serves CPU tensors, ``torch.ops.streamseg_triton``
    (Triton) CUDA tensors; both take the same arguments.
    """
    kind = "cuda" if t.device.type in _native.GPU_DEVICE_TYPES else t.device.type
    if t.dtype not in dtypes or not _native.enabled(kind):
        return None
    return torch.ops.streamseg_triton if kind == "cuda" else torch.ops.streamseg


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Greedy non-maximum suppression.

    Args:
        boxes: ``(N, 4)`` float xyxy pixels.
        scores: ``(N,)`` float.
        iou_threshold: a box is dropped when its IoU with a kept,
            higher-scored box is ``> iou_threshold``.

    Returns:
        ``(K,)`` int64 indices of the kept boxes by decreasing score (equal
        scores keep input order).
    """
    _check_scores(boxes, scores)
    kernels = _kernels(boxes) if boxes.dtype == scores.dtype else None
    if kernels is not None:
        return kernels.nms(boxes, scores, float(iou_threshold))
    return _ref.nms(boxes, scores, float(iou_threshold))


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """NMS independently within each category.

    Args:
        boxes: ``(N, 4)`` float xyxy pixels.
        scores: ``(N,)`` float.
        idxs: ``(N,)`` int64 category (or image) of each box; boxes of
            different ``idxs`` never suppress each other.
        iou_threshold: as in :func:`nms`.

    Returns:
        ``(K,)`` int64 indices of the kept boxes by decreasing score.
    """
    _check_scores(boxes, scores)
    _check(idxs.shape == scores.shape, f"idxs must be (N,), got shape {tuple(idxs.shape)}")
    kernels = _kernels(boxes) if boxes.dtype == scores.dtype else None
    if kernels is not None and idxs.device == boxes.device:
        return kernels.batched_nms(boxes, scores, idxs, float(iou_threshold))
    return _ref.batched_nms(boxes, scores, idxs, float(iou_threshold))


def roi_align(
    input: Tensor,
    rois: Tensor,
    output_size: tuple[int, int],
    spatial_scale: float,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    """RoIAlign with torchvision's semantics; differentiable w.r.t. ``input``.

    Args:
        input: ``(B, C, H, W)`` float feature map.
        rois: ``(K, 5)`` rows ``(batch_index, x1, y1, x2, y2)`` in image
            pixels, same dtype as ``input``.
        output_size: ``(oh, ow)`` bins.
        spatial_scale: feature pixels per image pixel (e.g. ``1/4``).
        sampling_ratio: samples per bin side; ``<= 0`` means adaptive
            ``ceil(roi_side / output_side)``.
        aligned: shift coordinates by -0.5 pixel (Detectron2 / v2 models).

    Returns:
        ``(K, C, oh, ow)`` of ``input``'s dtype.
    """
    _check(input.dim() == 4, f"input must be (B, C, H, W), got shape {tuple(input.shape)}")
    _check_boxes(rois, "rois", width=5)
    size = (int(output_size[0]), int(output_size[1]))
    return _roi_align(input, rois, size, float(spatial_scale), int(sampling_ratio), aligned)


def _roi_align(
    input: Tensor,
    rois: Tensor,
    size: tuple[int, int],
    scale: float,
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    kernels = _kernels(input, _ANY_FLOAT)
    if kernels is not None and rois.device == input.device:
        return kernels.roi_align(
            input, rois.detach(), scale, size[0], size[1], sampling_ratio, bool(aligned)
        )
    return _ref.roi_align(input, rois, size, scale, sampling_ratio, aligned)


def multiscale_roi_align(
    features: Sequence[Tensor],
    boxes: Sequence[Tensor] | Tensor,
    image_sizes: Sequence[tuple[int, int]],
    output_size: int | tuple[int, int],
    sampling_ratio: int,
    canonical_scale: float = 224.0,
    canonical_level: float = 4.0,
    *,
    aligned: bool = False,
) -> Tensor:
    """torchvision's ``MultiScaleRoIAlign``: each box pooled from its FPN level.

    Args:
        features: FPN maps ``(B, C, Hl, Wl)``, finest first (e.g. P2..P5).
        boxes: per image ``(Ki, 4)`` float xyxy image pixels, or one
            ``(B, K, 4)`` tensor (``K`` boxes for each image), or ``(K, 5)``
            rois ``(image_index, x1, y1, x2, y2)``.
        image_sizes: per image ``(h, w)`` before padding; scales are
            ``2 ** round(log2(Hl / max h))``.
        output_size: bins per side (or ``(oh, ow)``).
        sampling_ratio: as in :func:`roi_align`.
        canonical_scale, canonical_level: level =
            ``floor(canonical_level + log2(sqrt(area) / canonical_scale) + 1e-6)``,
            clamped to the available levels.
        aligned: as in :func:`roi_align` (torchvision uses ``False``).

    Returns:
        ``(sum Ki, C, oh, ow)`` in image order.
    """
    _check(len(features) > 0, "features must hold at least one feature map")
    if isinstance(boxes, Tensor) and boxes.dim() == 2:
        _check_boxes(boxes, "rois", width=5)
    elif isinstance(boxes, Tensor):
        _check(boxes.dim() == 3, f"boxes must be (B, K, 4), got shape {tuple(boxes.shape)}")
        _check_boxes(boxes[0])
    _check(
        (isinstance(boxes, Tensor) and boxes.dim() == 2) or len(boxes) == len(image_sizes),
        f"got {len(boxes)} box lists but {len(image_sizes)} image sizes",
    )
    if not isinstance(boxes, Tensor):
        for b in boxes:
            _check_boxes(b)
    kernels = _kernels(features[0], _ANY_FLOAT)
    return _ref.multiscale_roi_align(
        features,
        boxes,
        image_sizes,
        output_size,
        sampling_ratio,
        canonical_scale,
        canonical_level,
        aligned=aligned,
        align=None if kernels is None else _roi_align,
        # On a GPU, pool every RoI on every level: no sync for a level's RoI count.
        every_level=on_gpu(features[0]),
    )


def encode_boxes(reference: Tensor, proposals: Tensor, weights: Weights) -> Tensor:
    """Regression targets ``(N, 4)`` that take ``proposals (N, 4)`` to ``reference (N, 4)``.

    torchvision's ``BoxCoder.encode``; ``weights = (wx, wy, ww, wh)``.
    """
    _check_boxes(reference, "reference")
    _check_boxes(proposals, "proposals")
    return _ref.encode_boxes(reference, proposals, weights)


def decode_boxes(
    deltas: Tensor, boxes: Tensor, weights: Weights, clamp: float = BOX_CLAMP
) -> Tensor:
    """Apply regression ``deltas (N, 4k)`` to ``boxes (N, 4)`` xyxy -> ``(N, k, 4)`` xyxy.

    torchvision's ``BoxCoder.decode``: ``dw``, ``dh`` clamped at ``clamp``.
    """
    _check_boxes(boxes)
    _check(
        deltas.dim() == 2 and deltas.shape[0] == boxes.shape[0] and deltas.shape[1] % 4 == 0,
        f"deltas must be (N, 4k) with N = {boxes.shape[0]}, got shape {tuple(deltas.shape)}",
    )
    kernels = _kernels(deltas)
    if kernels is not None and boxes.device == deltas.device:
        wx, wy, ww, wh = (float(w) for w in weights)
        return kernels.decode_boxes(deltas, boxes, wx, wy, ww, wh, float(clamp))
    return _ref.decode_boxes(deltas, boxes, weights, float(clamp))


def clip_boxes(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    """Clamp ``(..., 4)`` xyxy boxes into an image of ``size = (h, w)`` pixels."""
    _check(boxes.shape[-1] == 4, f"boxes must be (..., 4), got shape {tuple(boxes.shape)}")
    return _ref.clip_boxes(boxes, size)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    """Indices (int64) of ``(N, 4)`` boxes with width and height ``>= min_size`` pixels."""
    _check_boxes(boxes)
    return _ref.remove_small_boxes(boxes, min_size)


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    """Pairwise IoU ``(N, M)`` of ``a (N, 4)`` and ``b (M, 4)`` xyxy boxes."""
    _check_boxes(a, "a")
    _check_boxes(b, "b")
    return _ref.box_iou(a, b)


def box_overlap_pairs(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The overlapping pairs of ``a (N, 4)`` and ``b (M, 4)`` float64 xyxy boxes, with their IoU.

    Returns ``rows (P,)`` into ``a``, ``cols (P,)`` into ``b`` (int64, by row
    then column) and ``iou (P,)`` float64: the pairs whose intersection has
    positive width and height, IoU ``inter / max(union, 1e-12)``. On the CPU
    one C++ call sweeps ``b`` by left edge (cost follows the nearby pairs);
    elsewhere every pair is tested with torch.
    """
    _check(
        a.dim() == 2 and a.shape[1] == 4 and b.dim() == 2 and b.shape[1] == 4,
        f"boxes must be (N, 4) and (M, 4), got {tuple(a.shape)} and {tuple(b.shape)}",
    )
    _check(
        a.dtype == torch.float64 and b.dtype == torch.float64,
        f"boxes must be float64, got {a.dtype} and {b.dtype}",
    )
    if a.is_cpu and b.is_cpu and _native.enabled("cpu"):
        rows, cols, iou = torch.ops.streamseg.box_overlap_pairs(a, b)
        return rows, cols, iou
    return _ref.box_overlap_pairs(a, b)


def native_cpu() -> bool:
    """Whether the C++ kernels serve CPU tensors (builds or loads them on the first call)."""
    return _native.enabled("cpu")


def warm_up(device: torch.device | str, dtypes: Sequence[torch.dtype] = (torch.float32,)) -> None:
    """Load the native kernels for ``device`` and, on a GPU, launch each op's kernel once
    for ``dtypes`` (the model's): a kernel that cannot run there is replaced by the
    reference now (``auto``; see :func:`reference_ops`), or raises
    ``NativeOpsError`` now (``native``), not on the first live frame."""
    device = torch.device(device)
    if _native.enabled(device.type) and device.type == "cuda":
        from streamseg.ops import triton as gpu_kernels

        gpu_kernels.warm_up(device, dtypes)


def reference_ops() -> dict[str, str]:
    """Ops whose GPU kernel failed in this process and that run on the reference: op -> error."""
    return _native.reference_ops()


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
    kernels = _kernels(masks, _ANY_FLOAT)
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
    kernels = _kernels(masks, _ANY_FLOAT)
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
    kernels = _kernels(masks, (torch.bool, torch.uint8)) if masks.shape[0] > 0 else None
    if kernels is not None and masks.device.type in _native.GPU_DEVICE_TYPES:
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
