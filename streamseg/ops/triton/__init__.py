"""Triton kernels: the CUDA path of streamseg's post-processing ops.

One module per op holds its ``@triton.jit`` kernels, the launch wrapper that
sizes the grid, and the ``torch.library.triton_op`` that registers that
wrapper as ``torch.ops.streamseg_triton.<op>``. A ``triton_op`` is its own
fake (meta) kernel: under ``FakeTensorMode`` the wrapper only allocates its
outputs and the kernel launches are recorded, not run, so ``torch.compile``
and ``torch.export`` trace through it.

The public functions in :mod:`streamseg.ops` send CUDA tensors here (CPU
tensors go to the C++ kernels). Tests call the same ``triton_op``\\ s on CPU
tensors under ``TRITON_INTERPRET=1``, Triton's interpreter, so every kernel
and its grid arithmetic runs in CI without a GPU.

Importing this package imports no kernel; :func:`load` does, once.
:func:`warm_up` calls every op once on a device, so that a kernel that
cannot launch there is found at start-up (see ``streamseg.ops._launch.launch``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable

import torch

__all__ = ["KERNEL_MODULES", "NAMESPACE", "load", "warm_up"]

NAMESPACE = "streamseg_triton"
KERNEL_MODULES = ("nms", "roi_align", "paste_masks", "rle", "box_coder")

_lock = threading.Lock()
_loaded = False


def load() -> None:
    """Import the kernel modules, registering ``torch.ops.streamseg_triton.*`` (idempotent).

    Raises ``ImportError`` when the ``triton`` package is missing (it comes
    with every CUDA build of torch; ``pip install triton`` otherwise).
    """
    global _loaded
    with _lock:
        if _loaded:
            return
        for name in KERNEL_MODULES:
            importlib.import_module(f"{__name__}.{name}")
        _loaded = True


def warm_up(
    device: torch.device,
    dtypes: Iterable[torch.dtype] = (torch.float32,),
    *,
    backward: bool = False,
) -> None:
    """Launch every op's kernel once on ``device`` with a few boxes of each of ``dtypes``
    (and RoIAlign's backward kernel with ``backward``, for training).

    A kernel that fails is replaced by the reference (``auto``) or raises
    ``NativeOpsError`` (``native``) here rather than on a live frame. NMS
    and box decoding take float32 and float64 only (the others go to the
    reference without a kernel): they warm up in float32.
    """
    load()
    ops = torch.ops.streamseg_triton
    from streamseg.ops.triton import rle

    boxes = torch.tensor([[2.0, 3.0, 20.0, 30.0], [4.0, 5.0, 22.0, 33.0]], device=device)
    scores = torch.tensor([0.9, 0.8], device=device)
    ops.nms(boxes, scores, 0.5)
    ops.batched_nms(boxes, scores, torch.tensor([0, 1], device=device), 0.5)
    ops.decode_boxes(torch.zeros(2, 8, device=device), boxes, 10.0, 10.0, 5.0, 5.0, 4.0)
    rle.masks_to_rle(torch.ones(2, 8, 8, dtype=torch.bool, device=device))
    for dtype in dict.fromkeys(dtypes):
        masks = torch.rand(2, 5, 5, device=device).to(dtype)
        ops.paste_masks(masks, boxes, 40, 30, 1)
        ops.paste_masks_binary(masks, boxes, 40, 30, 1, 0.5)
        rois = torch.cat((boxes.new_zeros(2, 1), boxes), 1).to(dtype)
        with torch.inference_mode(False), torch.enable_grad():
            features = torch.rand(1, 2, 8, 8, device=device).to(dtype).requires_grad_(backward)
            pooled = ops.roi_align(features, rois, 0.25, 2, 2, 2, False)
            if backward:
                pooled.sum().backward()
