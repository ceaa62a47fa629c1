"""RoIAlign, on one feature map and over the levels of a feature pyramid."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from streamseg.ops import reference as _ref
from streamseg.ops._checks import _check, _check_boxes
from streamseg.ops._native import on_gpu
from streamseg.ops._serve import _ANY_FLOAT, kernels_for


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
    kernels = kernels_for(input, _ANY_FLOAT)
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
    kernels = kernels_for(features[0], _ANY_FLOAT)
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
