"""The counts of :mod:`streamseg.ops.dispatch`, and where code reports a sync it makes."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import threading
from collections.abc import Iterator

__all__ = ["DispatchCounts", "EmulationError", "current", "record_sync"]


class EmulationError(RuntimeError):
    """The emulated GPU cannot run this (e.g. the Triton kernels are not interpreted)."""


@dataclasses.dataclass
class DispatchCounts:
    """Counts by op name (``aten::conv2d``, ``triton:_paste_kernel``, ``sync:D2H``...)."""

    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    launches: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    syncs: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # Where each sync was made: "kind at module:line" of the innermost streamseg frame.
    sync_sites: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    active: bool = True

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
_OURS = frozenset({__name__, "streamseg.ops._emulated", "streamseg.ops.dispatch"})


def _caller() -> str:
    """``module:line`` of the innermost frame of streamseg's code (the counting aside)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("streamseg.") and name not in _OURS:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def current() -> DispatchCounts | None:
    """The counts of this thread's emulation, while they count; else ``None``."""
    return _counts()


def _counts() -> DispatchCounts | None:
    counts: DispatchCounts | None = getattr(_STATE, "counts", None)
    return counts if counts is not None and counts.active else None


def record_sync(kind: str) -> None:
    """Count one host sync the code makes explicitly (e.g. waiting on a CUDA event).

    A no-op outside :func:`emulated_gpu`; call it next to the wait so that the
    emulated count sees what the GPU run does.
    """
    counts = _counts()
    if counts is not None:
        counts.sync(f"sync:{kind}")
