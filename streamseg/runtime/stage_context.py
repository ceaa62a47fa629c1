"""``StageContext``: what the segment, track and publish stages of a ``Pipeline`` share.

Each stage thread counts into the pipeline's stats and instruments, traces
its frames and reports to the pipeline an error it survives (``on_error``:
stage, exception, camera or ``None``) or one it cannot (``on_fail``: the
pipeline stops). ``Pipeline`` makes one and hands it to every stage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from streamseg.runtime.stats import PipelineStats
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.tracing import FrameTracer

__all__ = ["StageContext"]


@dataclasses.dataclass(frozen=True)
class StageContext:
    """The pipeline's counters, instruments, tracer and failure reports, for its stages."""

    stats: PipelineStats
    metrics: PipelineMetrics | None
    tracer: FrameTracer
    on_error: Callable[[str, BaseException, str | None], None]
    on_fail: Callable[[str, BaseException], None]
