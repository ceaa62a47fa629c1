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

The public functions live by what they work on (``boxes``, ``roi``,
``masks``; ``paste`` for the packed crops) and are all imported from here.

Example::

    >>> import torch
    >>> from streamseg import ops
    >>> boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]])
    >>> ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
    [0, 2]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from streamseg.ops import _launch, _native
from streamseg.ops._native import on_gpu
from streamseg.ops.boxes import (
    batched_nms,
    box_iou,
    box_overlap_pairs,
    clip_boxes,
    decode_boxes,
    encode_boxes,
    nms,
    remove_small_boxes,
)
from streamseg.ops.masks import (
    crops_to_rle,
    mask_to_rle,
    masks_to_rle,
    paste_masks,
    paste_masks_binary,
    paste_masks_crops,
    rle_to_mask,
)
from streamseg.ops.paste import paste_masks_packed, paste_regions
from streamseg.ops.roi import multiscale_roi_align, roi_align

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
    "native_cpu_library",
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


def native_cpu() -> bool:
    """Whether the C++ kernels serve CPU tensors (builds or loads them on the first call)."""
    return _native.enabled("cpu")


def native_cpu_library() -> str | None:
    """The path of the loaded C++ kernels' shared library (for a caller that binds one
    of its plain C functions, ``streamseg.track.pairs``), or ``None`` without it."""
    return str(_native.status()["library"]) if native_cpu() else None


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
    return _launch.reference_ops()
