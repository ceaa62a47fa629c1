"""The typed parts a :class:`~streamseg.runtime.pipeline.Pipeline` is built from.

``Pipeline(sources=..., stages=PipelineStages(...), limits=PipelineLimits(...),
hooks=PipelineHooks(...), telemetry=PipelineTelemetry(...))``: what runs, how
much may wait where, what is called back, and what is measured.
``streamseg.runtime.factory.build_pipeline`` fills them from ``pipeline.yaml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from streamseg.publish.encode import MessageEncoder
from streamseg.publish.sink import Sink
from streamseg.runtime.protocols import SegmenterLike, TrackingLike
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.tracing import FrameTracer
from streamseg.types import Event

if TYPE_CHECKING:
    from streamseg.console.live import LiveView

__all__ = ["PipelineHooks", "PipelineLimits", "PipelineStages", "PipelineTelemetry"]


@dataclasses.dataclass(frozen=True)
class PipelineStages:
    """What runs, after the sources.

    Args:
        segmenter: runs the model on a ``FrameBatch`` (``submit``).
        tracker: the tracking/alerts stage (``PassThrough``: results go on as
            they are).
        encoder: turns results and events into messages (JSON, once).
        sinks: where every message goes (Redis Streams, ...); at least one,
            names unique.
    """

    segmenter: SegmenterLike
    tracker: TrackingLike
    encoder: MessageEncoder
    sinks: Sequence[Sink]

    def __post_init__(self) -> None:
        if not self.sinks or len({s.name for s in self.sinks}) != len(self.sinks):
            raise ValueError("a pipeline needs at least one sink, each with its own name")


@dataclasses.dataclass(frozen=True)
class PipelineLimits:
    """How much may wait where and for how long, and where per-frame Python runs.

    Args:
        batch_size: frames per batch at most.
        max_wait: seconds a batch waits for more frames.
        camera_queue / results_queue / publish_queue: queue capacities (frames,
            results, batches of tracked results).
        drain_timeout: seconds allowed to drain and flush after ``stop()``.
        host_cpu: run the threads that run Python for every frame (track,
            publish and the sinks' writers) on this CPU only (``None``: no
            pinning). They take turns on the GIL anyway, and on one core the
            turns do not move their data between caches; decoding and the
            model keep every core.
    """

    batch_size: int
    max_wait: float
    camera_queue: int = 2
    results_queue: int = 8
    publish_queue: int = 64
    drain_timeout: float = 15.0
    host_cpu: int | None = None


@dataclasses.dataclass(frozen=True)
class PipelineHooks:
    """What the pipeline calls back (each ``None``: nothing).

    Args:
        between_batches: called with the segmenter in the segment thread
            between two batches (hot swap of weights).
        on_events: called with each frame's alert events after tracking
            (clips around alerts).
        tap: the console's live view: frames of watched cameras keep their
            pixels through tracking and are offered to it.
    """

    between_batches: Callable[[SegmenterLike], object] | None = None
    on_events: Callable[[list[Event]], None] | None = None
    tap: LiveView | None = None


@dataclasses.dataclass(frozen=True)
class PipelineTelemetry:
    """What the pipeline measures into (each ``None``: off)."""

    metrics: PipelineMetrics | None = None
    tracer: FrameTracer | None = None
