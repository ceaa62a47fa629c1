"""Overlapping box pairs from the native kernel, called without giving up the GIL.

The tracker asks for overlapping (track, detection) and (detection,
detection) pairs two or three times per frame. Through torch
(``torch.ops.streamseg.box_overlap_pairs``) each call releases the GIL for
its length, and in ``serve`` another thread of the process (encoding,
publishing) that takes it meanwhile keeps it for a whole switch interval
(5 ms by default): under load that hand-over, not the kernel's microseconds,
was most of a frame's tracking time. The same C++ sweep is also exported as
a plain C function, ``streamseg_box_overlap_pairs_into``; called here through
``ctypes.PyDLL`` the GIL stays held, and the results land in buffers kept
from frame to frame (no tensor made per call).

:func:`overlap_pairs_native` returns ``None`` when the native library is not
loaded (``STREAMSEG_OPS=reference``, or no compiler): the caller then uses
its numpy path.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from numpy.typing import NDArray

from streamseg import ops

__all__ = ["overlap_pairs_native"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

_SYMBOL = "streamseg_box_overlap_pairs_into"
_P = ctypes.c_void_p
_N = ctypes.c_int64


class _Kernel:
    """The C function and this thread's output buffers (grown, never shrunk)."""

    def __init__(self, library: str) -> None:
        fn = getattr(ctypes.PyDLL(library), _SYMBOL)  # PyDLL: the GIL stays held
        fn.argtypes = [_P, _N, _P, _N, _P, _P, _P, _N]
        fn.restype = _N
        self.fn = fn
        self.local = threading.local()

    def __call__(self, a: F64, b: F64) -> tuple[I64, I64, F64]:
        buf = getattr(self.local, "buf", None)
        if buf is None:
            buf = self._grow(1024)
        while True:
            rows, cols, iou = buf
            cap = len(rows)
            p = self.fn(
                a.ctypes.data, len(a), b.ctypes.data, len(b),
                rows.ctypes.data, cols.ctypes.data, iou.ctypes.data, cap,
            )  # fmt: skip
            if p <= cap:
                return rows[:p].copy(), cols[:p].copy(), iou[:p].copy()
            buf = self._grow(2 * p)

    def _grow(self, n: int) -> tuple[I64, I64, F64]:
        buf = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.float64))
        self.local.buf = buf
        return buf


_kernel: _Kernel | None = None
_missing = False  # the library is loaded but lacks the symbol (an older build)


def overlap_pairs_native(a: F64, b: F64) -> tuple[I64, I64, F64] | None:
    """``box_overlap_pairs`` of ``a (N, 4)`` and ``b (M, 4)`` float64 xyxy boxes, GIL held.

    The same pairs, order and IoU floats as :func:`streamseg.ops.box_overlap_pairs`;
    ``None`` when the native library is not available.
    """
    global _kernel, _missing
    kernel = _kernel
    if kernel is None:
        library = None if _missing else ops.native_cpu_library()
        if library is None:
            return None
        try:
            kernel = _kernel = _Kernel(library)
        except (OSError, AttributeError):
            _missing = True
            return None
    return kernel(np.ascontiguousarray(a, np.float64), np.ascontiguousarray(b, np.float64))
