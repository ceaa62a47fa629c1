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
"""

from __future__ import annotations

import importlib
import threading

__all__ = ["KERNEL_MODULES", "NAMESPACE", "load"]

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
