"""Where code reports a host sync it makes explicitly (e.g. waiting on a CUDA event).

A wait on an event is invisible to anything that watches torch's ops, so
code that makes one calls :func:`record_sync` next to it. What counts host
syncs (the emulated GPU of :mod:`streamseg.bench.emulated`) adds itself
once with :func:`add_sync_counter`; with none added, :func:`record_sync`
does nothing. Serving code depends on this module alone, never on the
benchmarks that count.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SyncCounter", "add_sync_counter", "record_sync"]


class SyncCounter(Protocol):
    """Told of each explicit host sync, by what it waits for."""

    def __call__(self, kind: str) -> None: ...


_COUNTERS: list[SyncCounter] = []


def add_sync_counter(counter: SyncCounter) -> None:
    """Tell ``counter`` of every later :func:`record_sync` (once, however often added)."""
    if counter not in _COUNTERS:
        _COUNTERS.append(counter)


def record_sync(kind: str) -> None:
    """Count one host sync the code makes explicitly, where a counter listens."""
    for counter in _COUNTERS:
        counter(kind)
