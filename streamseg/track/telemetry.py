"""Tracking and alert metrics through the OpenTelemetry API.

Instruments (the runtime installs the providers and exporters):

* ``streamseg.track.rules.events`` (counter; ``camera``, ``rule``, ``kind``):
  events emitted, so ``line_in`` / ``line_out`` give running line counts;
* ``streamseg.track.rules.failures`` (counter; ``camera``, ``rule``):
  rules disabled because they failed (the camera's other rules go on);
* ``streamseg.track.rules.occupancy`` (gauge; ``camera``, ``rule``, ``zone``):
  confirmed tracks inside each zone rule's zone;
* ``streamseg.track.started`` (counter; ``camera``): tracks confirmed;
* ``streamseg.track.active`` (gauge; ``camera``, ``state``): live tracks
  by state (``tentative``, ``confirmed``, ``lost``).

Gauges are observed through one callback per process that visits every
live ``TrackingStage`` (weakly referenced), so building several stages in
one process never registers the same instrument twice.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

__all__ = ["Instruments", "instruments", "watch"]


class Observed(Protocol):
    def occupancy_observations(self) -> Iterator[tuple[int, dict[str, str]]]: ...

    def track_observations(self) -> Iterator[tuple[int, dict[str, str]]]: ...


class Instruments:
    """The counters stages add to, and the gauges' shared callbacks."""

    def __init__(self, provider: metrics.MeterProvider | None = None) -> None:
        alert = metrics.get_meter("streamseg.track.rules", meter_provider=provider)
        track = metrics.get_meter("streamseg.track", meter_provider=provider)
        self.events = alert.create_counter(
            "streamseg.track.rules.events", "{event}", "alert events emitted (camera, rule, kind)"
        )
        self.failures = alert.create_counter(
            "streamseg.track.rules.failures",
            "{rule}",
            "rules disabled because they failed (camera, rule)",
        )
        self.started = track.create_counter(
            "streamseg.track.started", "{track}", "tracks confirmed (camera)"
        )
        self.stages: weakref.WeakSet[Any] = weakref.WeakSet()
        alert.create_observable_gauge(
            "streamseg.track.rules.occupancy",
            callbacks=[self._occupancy],
            unit="{track}",
            description="confirmed tracks inside each zone rule's zone (camera, rule, zone)",
        )
        track.create_observable_gauge(
            "streamseg.track.active",
            callbacks=[self._active],
            unit="{track}",
            description="live tracks by state (camera, state)",
        )

    def _occupancy(self, options: CallbackOptions) -> Iterable[Observation]:
        for stage in list(self.stages):
            for value, attrs in stage.occupancy_observations():
                yield Observation(value, attrs)

    def _active(self, options: CallbackOptions) -> Iterable[Observation]:
        for stage in list(self.stages):
            for value, attrs in stage.track_observations():
                yield Observation(value, attrs)


_lock = threading.Lock()
_instruments: Instruments | None = None


def instruments() -> Instruments:
    """The process's instruments (created on first use)."""
    global _instruments
    with _lock:
        if _instruments is None:
            _instruments = Instruments()
        return _instruments


def watch(stage: Observed, provider: metrics.MeterProvider | None = None) -> Instruments:
    """Include ``stage`` in the gauges until it is closed or collected.

    ``provider``: a private meter provider (tests); default the global one.
    """
    inst = instruments() if provider is None else Instruments(provider)
    inst.stages.add(stage)
    return inst
