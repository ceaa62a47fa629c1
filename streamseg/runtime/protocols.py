"""What the runtime needs from the other stages (see docs/architecture.md).

Structural types only: the runtime never imports a stage's implementation
here, so it can be built and tested on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from streamseg.ingest.health import CameraHealth
from streamseg.types import Event, Frame, FrameBatch, FrameResult, Instances

__all__ = ["PassThrough", "SegmenterLike", "SourceLike", "TrackingLike"]


class SourceLike(Protocol):
    """``streamseg.ingest.open_source(...)``'s result."""

    live: bool

    @property
    def health(self) -> CameraHealth: ...

    def run(self, emit: Callable[[Frame], None], stop: threading.Event) -> None: ...


class SegmenterLike(Protocol):
    """The model, as the pipeline uses it: ``streamseg.segment.Segmenter`` in
    this process, ``streamseg.hosting.process.ModelProcess`` in its own,
    ``streamseg.bench.oracle.OracleSegmenter`` for the host-path benchmark.

    ``submit`` hands over one batch and returns a future of its instances,
    one per frame in order: done at once (result or exception) when the
    model runs in the caller's thread; with the model in its own process it
    returns as soon as the batch is sent, so the next one can be sent while
    this one runs, and futures settle in the order the batches were sent.
    """

    @property
    def class_names(self) -> tuple[str, ...]: ...

    @property
    def ops_on_reference(self) -> Mapping[str, str]:
        """Post-processing ops running on the PyTorch reference: op -> why."""
        ...

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds spent segmenting so far, in whichever thread or process ran it."""
        ...

    def submit(self, batch: FrameBatch) -> Future[list[Instances]]: ...

    def warm_up(self) -> float: ...

    def health(self) -> dict[str, Any] | None:
        """The model's own process as ``/readyz`` shows it; ``None`` when it has none."""
        ...

    def close(self) -> None: ...


class TrackingLike(Protocol):
    """What the pipeline's track stage runs for each frame: the trackers and alert
    rules of every camera (``streamseg.track.stage.TrackingStage``), or
    :class:`PassThrough` when tracking and alerts are both off.

    The seam: ``streamseg.runtime.tracking.TrackStage`` is the pipeline's
    stage ``track`` (a thread between two queues, the live view's frames, the
    clip hook's events) and knows only this protocol; ``TrackingStage`` knows
    no queue or thread, and asks each camera's tracker only the one tracker
    interface (``streamseg.track.trackers.InstanceTracker``)."""

    @property
    def rules_seconds(self) -> float:
        """CPU seconds spent in the alert rules so far (part of ``process``)."""
        ...

    def process(self, result: FrameResult) -> tuple[FrameResult, list[Event]]:
        """One frame's instances gain track ids; the frame's alert events."""
        ...

    def counts(self, camera_id: str) -> Mapping[str, object]:
        """What the overlays show: ``{zone: tracks inside}``, ``{line: (in, out)}``."""
        ...

    def set_alerts(self, alerts: Any) -> None:
        """Replace the rules (the ``alerts:`` section) before the next frame (any thread)."""
        ...

    def forget_camera(self, camera_id: str) -> None:
        """Drop a removed camera's tracks and rule state (any thread)."""
        ...

    def degraded(self) -> Mapping[str, Mapping[str, str]]:
        """``{camera: {rule: why}}`` of rules disabled because they failed."""
        ...

    def close(self) -> None: ...


class PassThrough:
    """The :class:`TrackingLike` of a pipeline without tracking and alerts: results
    go on as they came, with no events."""

    rules_seconds = 0.0

    def process(self, result: FrameResult) -> tuple[FrameResult, list[Event]]:
        return result, []

    def counts(self, camera_id: str) -> Mapping[str, object]:
        return {}

    def set_alerts(self, alerts: Any) -> None:
        raise ValueError(
            "alert rules cannot run: tracking and alerts are both disabled "
            "(set alerts.enabled: true and restart)"
        )

    def forget_camera(self, camera_id: str) -> None:
        """Nothing kept."""

    def degraded(self) -> Mapping[str, Mapping[str, str]]:
        return {}

    def close(self) -> None:
        """Nothing to release."""
