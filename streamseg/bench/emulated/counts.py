"""The counts of :mod:`streamseg.bench.emulated`, and the syncs code reports it makes."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

__all__ = ["DeviceMemory", "DispatchCounts", "EmulationError", "current", "record_sync"]


class EmulationError(RuntimeError):
    """The emulated GPU cannot run this (e.g. the Triton kernels are not interpreted)."""


class DeviceMemory:
    """The emulated device's memory: bytes of the storages its tensors hold.

    ``in_use`` and ``peak`` count each storage once, from when a tensor of
    the device first holds it until the last one is freed (what CUDA's
    ``memory_allocated`` and ``max_memory_allocated`` count, without the
    caching allocator's rounding). With a ``limit``, an op whose results
    would take ``in_use`` past it raises :class:`torch.OutOfMemoryError`, as
    CUDA does when an allocation fails. In autograd's backward thread an
    exception from a Python dispatch mode aborts the process, so there the
    error is kept and raised by the next op of the emulation's own thread
    (right after ``backward()`` returns).
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self.pending: BaseException | None = None
        self._owner = threading.current_thread()
        self._holders: dict[int, list[int]] = {}  # storage address -> [tensors, bytes]
        self._lock = threading.Lock()

    def raise_pending(self) -> None:
        """Raise the error of an allocation that failed in another thread, if any
        (in the emulation's own thread only)."""
        if self.pending is not None and threading.current_thread() is self._owner:
            exc, self.pending = self.pending, None
            try:
                raise exc
            finally:
                del exc  # no cycle through this frame: the failed step's tensors go at once

    def reset_peak(self) -> None:
        """Start a new peak from what is in use now."""
        self.peak = self.in_use

    def hold(self, wrapper: Any, elem: Any) -> None:
        """Account for ``wrapper`` (a device tensor) holding ``elem``'s storage."""
        storage = elem.untyped_storage()
        key, size = storage.data_ptr(), storage.nbytes()
        with self._lock:
            held = self._holders.get(key)
            if held is not None:
                held[0] += 1
            else:
                if self.limit is not None and self.in_use + size > self.limit:
                    if threading.current_thread() is self._owner:
                        raise _out_of_memory(size, self.in_use, self.limit)
                    self.pending = self.pending or _out_of_memory(size, self.in_use, self.limit)
                self._holders[key] = [1, size]
                self.in_use += size
                self.peak = max(self.peak, self.in_use)
        weakref.finalize(wrapper, self._release, key)

    def _release(self, key: int) -> None:
        with self._lock:
            held = self._holders[key]
            held[0] -= 1
            if held[0] == 0:
                self.in_use -= held[1]
                del self._holders[key]


def _out_of_memory(size: int, in_use: int, limit: int) -> BaseException:
    import torch

    mib = 1 << 20
    return torch.OutOfMemoryError(
        f"emugpu out of memory. Tried to allocate {size / mib:.2f} MiB (emulated GPU 0; "
        f"{limit / mib:.2f} MiB limit, {in_use / mib:.2f} MiB already allocated)"
    )


@dataclasses.dataclass
class DispatchCounts:
    """Counts by op name (``aten::conv2d``, ``triton:_paste_kernel``, ``sync:D2H``...)."""

    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    launches: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    syncs: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # Where each sync was made: "kind at module:line" of the innermost streamseg frame.
    sync_sites: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    active: bool = True
    memory: DeviceMemory = dataclasses.field(default_factory=DeviceMemory)

    def clear(self) -> None:
        self.ops.clear()
        self.launches.clear()
        self.syncs.clear()
        self.sync_sites.clear()

    def sync(self, kind: str) -> None:
        """Count one host sync of ``kind`` and where the code made it."""
        self.syncs[kind] += 1
        self.sync_sites[f"{kind} at {_caller()}"] += 1

    def totals(self) -> dict[str, int]:
        """``{"ops", "launches", "triton_launches", "syncs"}`` summed over names."""
        return {
            "ops": sum(self.ops.values()),
            "launches": sum(self.launches.values()),
            "triton_launches": sum(v for k, v in self.launches.items() if k.startswith("triton:")),
            "syncs": sum(self.syncs.values()),
        }

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Count nothing inside (set-up work that is not part of what is measured)."""
        with self._active(False):
            yield

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        """Count inside (within :meth:`paused`: the part that is measured)."""
        with self._active(True):
            yield

    @contextlib.contextmanager
    def _active(self, active: bool) -> Iterator[None]:
        was, self.active = self.active, active
        try:
            yield
        finally:
            self.active = was


_STATE = threading.local()
# Every emulation running, in any thread: autograd runs a backward pass of a
# non-CPU device in a thread of its own, which counts into the one emulation
# (see :func:`emulation`).
_RUNNING: list[DispatchCounts] = []
_OURS = frozenset(
    {__name__, "streamseg.bench.emulated.device", "streamseg.bench.emulated", "streamseg.ops.syncs"}
)


def _caller() -> str:
    """``module:line`` of the innermost frame of streamseg's code (the counting aside)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("streamseg.") and name not in _OURS:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    if threading.current_thread() is not threading.main_thread():
        return "autograd backward"  # autograd's device thread: no frame of ours
    return "?"


def current() -> DispatchCounts | None:
    """The counts of this thread's emulation, while they count; else ``None``."""
    return _counts()


def emulation() -> DispatchCounts | None:
    """The counts of this thread's emulation, or in a thread without one (autograd's
    backward thread) of the only emulation running; counting or paused."""
    counts: DispatchCounts | None = getattr(_STATE, "counts", None)
    if counts is None and len(_RUNNING) == 1:
        return _RUNNING[0]
    return counts


def _counts() -> DispatchCounts | None:
    counts = emulation()
    return counts if counts is not None and counts.active else None


def record_sync(kind: str) -> None:
    """Count one host sync the code makes explicitly (e.g. waiting on a CUDA event).

    A no-op outside :func:`emulated_gpu`. Serving code reports its waits through
    :func:`streamseg.ops.syncs.record_sync`, which the emulated device passes here.
    """
    counts = _counts()
    if counts is not None:
        counts.sync(f"sync:{kind}")
