"""The packed crops of a mask paste: regions first, then every crop in one buffer.

What Mask R-CNN's post-processing runs on a GPU, where the crops' total size
must reach the host (one copy, with the boxes) before a buffer can be
sized, and where nothing may loop over masks. Re-exported by
:mod:`streamseg.ops`.
"""

from __future__ import annotations

from torch import Tensor

from streamseg.ops import _native
from streamseg.ops import reference as _ref
from streamseg.ops._checks import _check, _check_boxes, _check_paste

__all__ = ["paste_masks_packed", "paste_regions"]


def paste_regions(
    boxes: Tensor, mask_size: int, image_size: tuple[int, int] | Tensor, padding: int = 1
) -> Tensor:
    """The regions of :func:`paste_masks_crops`, without pasting: ``(N, 4)`` int64.

    Args:
        boxes: ``(N, 4)`` float xyxy frame pixels.
        mask_size: ``M`` of the ``(N, M, M)`` masks to be pasted.
        image_size: frame ``(h, w)``, or ``(N, 2)`` int64 one per box.
        padding: as :func:`paste_masks`.

    Returns:
        ``x0, y0, x1, y1`` (exclusive, inside the frame) of each expanded box.
    """
    _check_boxes(boxes)
    if isinstance(image_size, Tensor):
        _check(
            image_size.shape == (boxes.shape[0], 2),
            f"image sizes must be (N, 2), got shape {tuple(image_size.shape)}",
        )
    else:
        image_size = (int(image_size[0]), int(image_size[1]))
    return _ref.paste_regions(_ref.paste_boxes(boxes, int(mask_size), int(padding)), image_size)


def paste_masks_packed(
    masks: Tensor,
    boxes: Tensor,
    regions: Tensor,
    total: int,
    threshold: float = 0.5,
    padding: int = 1,
) -> Tensor:
    """:func:`paste_masks_crops`' crops in one flat buffer, with no host sync.

    Args:
        masks: ``(N, M, M)`` float probabilities.
        boxes: ``(N, 4)`` float xyxy frame pixels.
        regions: ``(N, 4)`` int64, :func:`paste_regions` of these boxes.
        total: the sum of the regions' areas, known to the caller (so that
            nothing here waits for the device).
        threshold: ``>= 0``, as :func:`paste_masks_crops`.
        padding: as :func:`paste_masks`.

    Returns:
        ``(total,)`` bool: each region's pixels row by row, region after
        region (``MaskCrops(..., flat=...)`` takes it as it is).
    """
    _check_paste(masks, boxes, (0, 0))
    _check(
        regions.shape == boxes.shape and not regions.dtype.is_floating_point,
        f"regions must be (N, 4) integers, got shape {tuple(regions.shape)} {regions.dtype}",
    )
    _check(threshold >= 0, f"threshold must be >= 0 for crops (got {threshold})")
    # On a GPU every pixel at once (a fixed number of launches); on the CPU one
    # interpolation per box, which costs less there. The same bits.
    paste = _ref.paste_masks_packed if _native.on_gpu(masks) else _ref.paste_masks_packed_loop
    return paste(masks, boxes, regions, int(total), float(threshold), int(padding))
