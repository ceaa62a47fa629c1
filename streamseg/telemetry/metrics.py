"""The runtime's metrics (OpenTelemetry instruments), named ``streamseg.<stage>.<what>``.

Counters and histograms are updated by the stages as things happen; gauges
(queue depths, camera health, Redis buffer) are observed at export time
through callbacks the runtime registers with ``observe(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

__all__ = ["HEALTH_STATES", "LATENCY_BUCKETS", "PipelineMetrics"]

# Seconds: from 1 ms to 1 min.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.35, 0.5,
    0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

HEALTH_STATES = (
    "connecting", "streaming", "stalled", "backing_off", "finished", "failed", "stopped",
)  # fmt: skip

Attrs = Mapping[str, str]


class PipelineMetrics:
    """All runtime instruments on one meter."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        c, h = meter.create_counter, meter.create_histogram
        self.frames_in = c("streamseg.ingest.frames", "{frame}", "frames read from cameras")
        self.frames_dropped = c(
            "streamseg.ingest.dropped", "{frame}", "frames dropped before segmentation (reason)"
        )
        self.frames_processed = c("streamseg.segment.frames", "{frame}", "frames segmented")
        self.batch_size = h(
            "streamseg.batch.size",
            "{frame}",
            "frames per forward pass",
            explicit_bucket_boundaries_advisory=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64),
        )
        self.stage_latency = h(
            "streamseg.stage.duration",
            "s",
            "time one stage spends on one batch (attribute stage)",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.e2e_latency = h(
            "streamseg.pipeline.latency",
            "s",
            "capture to Redis acknowledgement, per frame",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.queue_wait = h(
            "streamseg.batch.queue_wait",
            "s",
            "capture to the start of segmentation, per frame",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.messages = c(
            "streamseg.publish.messages", "{message}", "messages written to Redis (type)"
        )
        self.redis_errors = c(
            "streamseg.publish.errors", "{error}", "failed Redis calls (op, error: exception class)"
        )
        self.redis_reconnects = c(
            "streamseg.publish.reconnects",
            "{attempt}",
            "connection attempts while Redis was away (outcome: ok, failed)",
        )
        self.redis_dropped = c(
            "streamseg.publish.dropped", "{message}", "messages dropped: Redis away, buffer full"
        )
        self.stage_errors = c(
            "streamseg.runtime.errors", "{error}", "exceptions caught in a stage (stage)"
        )
        self.events = c("streamseg.track.events", "{event}", "alert events raised (kind)")

    def observe(
        self,
        *,
        queue_depths: Callable[[], Mapping[str, int]],
        camera_health: Callable[[], Mapping[str, tuple[str, int, int]]],
        redis_state: Callable[[], tuple[bool, int]],
    ) -> None:
        """Register gauges read at export time.

        Args:
            queue_depths: ``{queue name: items waiting}``.
            camera_health: ``{camera: (state, reconnects, stalls)}``.
            redis_state: ``(connected, messages buffered)``.
        """

        def depths(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, {"queue": q}) for q, n in queue_depths().items()]

        def health(_: CallbackOptions) -> Iterable[Observation]:
            out = []
            for cam, (state, _r, _s) in camera_health().items():
                for s in HEALTH_STATES:
                    out.append(Observation(int(s == state), {"camera": cam, "state": s}))
            return out

        def reconnects(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(r, {"camera": c}) for c, (_s, r, _n) in camera_health().items()]

        def stalls(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, {"camera": c}) for c, (_s, _r, n) in camera_health().items()]

        def redis_connected(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(int(redis_state()[0]))]

        def redis_buffered(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(redis_state()[1])]

        g = self.meter.create_observable_gauge
        g("streamseg.runtime.queue_depth", [depths], "{item}", "items waiting in a queue")
        g("streamseg.ingest.health", [health], "1", "1 for the camera's current state")
        self.meter.create_observable_counter(
            "streamseg.ingest.reconnects", [reconnects], "{reconnect}", "camera reconnects"
        )
        self.meter.create_observable_counter(
            "streamseg.ingest.stalls",
            [stalls],
            "{stall}",
            "open camera streams that sent nothing for read_timeout and were closed",
        )
        g("streamseg.publish.connected", [redis_connected], "1", "1 while Redis answers")
        g("streamseg.publish.buffered", [redis_buffered], "{message}", "messages awaiting Redis")
