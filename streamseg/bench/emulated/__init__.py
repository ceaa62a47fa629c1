"""What one inference asks of a GPU, counted on a CPU: torch ops, kernel launches, host syncs.

On a GPU the cost of a frame is as much the number of kernel launches and
of host synchronisations as the arithmetic: each launch costs the CPU a few
microseconds, and each sync makes the CPU wait for the GPU to drain its
queue, after which the GPU waits for the CPU. Both counts are properties of
the Python code, so they can be measured without a GPU.

:func:`emulated_gpu` gives a device that behaves like CUDA for the code that
runs on it: tensors created on it or moved to it report that device (so
``tensor.device``, the ops' choice of kernels and every ``.to(device)`` act
as on a GPU), while their data lives on the CPU. Every torch op on it passes
through one :class:`~torch.utils._python_dispatch.TorchDispatchMode`, which
runs it on the CPU and counts it, and the Triton kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``) on the CPU copies. The public ops of
:mod:`streamseg.ops` send tensors of this device to the Triton kernels, as
they do CUDA tensors (:func:`streamseg.ops._native.gpu_device`); with
``STREAMSEG_OPS=reference`` to the PyTorch references.

What is counted (:class:`DispatchCounts`):

* **ops**: every aten op dispatched, on the device or on the host, views
  included: each costs the CPU the dispatcher's time.
* **launches**: work queued on the GPU's stream: every device op that is
  not a view or an allocation (one per op: sort, nonzero or a convolution
  may launch several kernels, so this is a lower bound), every copy between
  host and device, and every Triton kernel launch.
* **syncs**: points where the CPU must wait for the GPU to reach them:

  1. reading a device value on the host: ``.item()``, ``bool()``,
     ``int()``, ``float()`` of a tensor, ``.tolist()``, ``.cpu()``, any
     copy to the host without ``non_blocking=True``;
  2. a copy from the host to the device without ``non_blocking=True``
     (CUDA synchronises the stream after a pageable copy), including
     ``torch.tensor(data, device=gpu)`` and indexing a device tensor with a
     host index tensor;
  3. an op whose output size depends on device data: ``nonzero`` (also
     ``torch.where(cond)``), ``masked_select``, indexing or assigning with a
     bool mask, ``unique``, ``bincount``, ``repeat_interleave`` without
     ``output_size``.

  A ``non_blocking`` copy is not counted: its data is valid only after an
  explicit wait (a CUDA event), which is counted where the code makes it
  (:func:`record_sync`).

What runs on the host tensors (built from Python data, or copied back) is
counted as ops but never as launches. An op mixing a device tensor with a
host tensor of more than one element raises, as CUDA does.

The device is PyTorch's ``privateuse1`` backend renamed to
:data:`DEVICE_TYPE` with a Python device guard (PyTorch's own hook for
Python backends); it is registered once per process, on first use.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import torch

from streamseg.bench.emulated.counts import (
    _RUNNING,
    _STATE,
    DeviceMemory,
    DispatchCounts,
    EmulationError,
    record_sync,
)
from streamseg.bench.emulated.device import (
    _ACTIVE,
    DEVICE_TYPE,
    _Dispatch,
    _interpreted_launches,
    _PythonLevel,
    register,
)

__all__ = [
    "DEVICE_TYPE",
    "DeviceMemory",
    "DispatchCounts",
    "EmulationError",
    "emulated_gpu",
    "record_sync",
]


def _check_interpreter() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise EmulationError(
            "the emulated GPU runs the Triton kernels in Triton's interpreter: set "
            "TRITON_INTERPRET=1 before triton is first imported (streamseg bench dispatch does)"
        )
    kernels = sys.modules.get("streamseg.ops.triton.nms")
    if kernels is not None and type(kernels._scan_kernel).__name__ != "InterpretedFunction":
        raise EmulationError(
            "the Triton kernels were compiled for a real GPU in this process (imported before "
            "TRITON_INTERPRET=1 was set); run the emulation in a fresh process"
        )


@contextlib.contextmanager
def emulated_gpu(
    *, interpret: bool = False, memory_limit: int | None = None
) -> Iterator[tuple[torch.device, DispatchCounts]]:
    """``(device, counts)``: an emulated GPU and what runs on it, counted.

    With ``interpret``, every Triton kernel runs in Triton's interpreter
    (slow: minutes for a RoIAlign of a few hundred boxes); without, each
    Triton op's launches are counted and its result taken from its C++
    twin when the C++ kernels are built (the interpreter otherwise).

    Move a model and its inputs to ``device`` inside the block; everything
    torch does meanwhile (on any device) is counted in ``counts``; use
    ``counts.paused()`` around set-up and ``counts.clear()`` to start a
    measurement. One emulation per thread at a time. ``counts.memory``
    (:class:`DeviceMemory`) holds the bytes the device's tensors take and
    their peak; with ``memory_limit`` (bytes) an op that would take more
    raises :class:`torch.OutOfMemoryError`, as CUDA does.

    A backward pass of the device's tensors runs in autograd's own thread;
    it counts into the emulation when only one is running in the process.

    Raises:
        EmulationError: ``TRITON_INTERPRET=1`` is not set (the Triton
            kernels would need a real GPU).
    """
    _check_interpreter()
    register()
    counts = DispatchCounts(memory=DeviceMemory(memory_limit))
    if getattr(_STATE, "counts", None) is not None:
        raise EmulationError("emulated_gpu() is already active in this thread")
    _STATE.counts = counts
    _RUNNING.append(counts)
    _ACTIVE[0] += 1
    try:
        with _interpreted_launches(counts), _PythonLevel(), _Dispatch(interpret=interpret):
            yield torch.device(DEVICE_TYPE, 0), counts
    finally:
        _ACTIVE[0] -= 1
        _RUNNING.remove(counts)
        _STATE.counts = None
