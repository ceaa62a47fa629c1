"""How the C allocator hands out tensor memory in a long-running process.

glibc's ``malloc`` serves a block of 128 KiB or more with a fresh ``mmap``
and gives it back with ``munmap`` when it is freed. Its threshold rises on
its own only after such a block is freed, so how a process allocates
depends on what it happened to free before. A CPU model's activations are
megabytes: below the threshold they come back from the heap already mapped;
above it every batch maps them anew and pays a page fault per 4 KiB.
Measured on the 2-core development machine (small model, 320x240, one
thread): the same model ran 58-60 frames/s in one process and 68-72 in
another, until both fixed the thresholds (69-72 in either).

:func:`keep_heap_memory` fixes them: blocks up to 32 MiB come from the
heap, and up to 256 MiB of free heap stays mapped. The process keeps its
peak heap instead of returning it between batches, which a service that
runs the same batches all day wants.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

__all__ = ["keep_heap_memory"]

log = logging.getLogger("streamseg.runtime")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 256 * 2**20

_done = False


def keep_heap_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (once); ``False``
    where there is no glibc (another C library, another system)."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    if not ok:
        log.debug("runtime: mallopt refused the heap thresholds")
    _done = ok
    return ok
