"""The runtime's metrics (OpenTelemetry instruments), named ``streamseg.<stage>.<what>``.

Counters and histograms are updated by the stages as things happen; gauges
(queue depths, camera health, each sink's connection and buffer) are
observed at export time through callbacks the runtime registers with
``observe(...)``. Publishing figures carry the attribute ``sink`` (the
sink's name: ``redis`` for the ``redis:`` section, then the ``sinks:`` names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from streamseg.telemetry.counters import (
    FRAME_COUNTERS,
    MESSAGE_COUNTERS,
    frame_metric,
    message_metric,
)

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
    """All runtime instruments on one meter (the frame and message counters
    named as :mod:`streamseg.telemetry.counters` says)."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        c, h = meter.create_counter, meter.create_histogram
        # The frame and message counters: names and meanings from telemetry.counters.
        self.frames_read = c(frame_metric("read"), "{frame}", FRAME_COUNTERS["read"])
        self.frames_skipped = c(
            frame_metric("skipped"), "{frame}", FRAME_COUNTERS["skipped"] + " (camera, reason)"
        )
        self.frames_segmented = c(frame_metric("segmented"), "{frame}", FRAME_COUNTERS["segmented"])
        self.frames_published = c(frame_metric("published"), "{frame}", FRAME_COUNTERS["published"])
        self.frames_lost = c(
            frame_metric("lost"), "{frame}", FRAME_COUNTERS["lost"] + " (camera, reason)"
        )
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
        self.processing_latency = h(
            "streamseg.pipeline.processing_latency",
            "s",
            "capture to publish (the frame's messages handed to the sinks), per frame",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.delivery_delay = h(
            "streamseg.publish.delivery_delay",
            "s",
            "publish to the sink's acknowledgement, per message (sink)",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.queue_wait = h(
            "streamseg.batch.queue_wait",
            "s",
            "capture to the start of segmentation, per frame",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.messages = c(
            message_metric("published"),
            "{message}",
            MESSAGE_COUNTERS["published"] + " (sink, type)",
        )
        self.sink_errors = c(
            "streamseg.publish.errors",
            "{error}",
            "failed sink calls (sink, op, error: exception class)",
        )
        self.sink_reconnects = c(
            "streamseg.publish.reconnects",
            "{attempt}",
            "connection attempts while a sink was away (sink, outcome: ok, failed)",
        )
        self.messages_lost = c(
            message_metric("lost"), "{message}", MESSAGE_COUNTERS["lost"] + " (sink)"
        )
        self.swap_refused = c(
            "streamseg.swap.refused",
            "{request}",
            "hot swap requests refused (reason: missing_token, wrong_token)",
        )
        self.stage_errors = c(
            "streamseg.runtime.errors", "{error}", "exceptions caught in a stage (stage)"
        )

    def observe(
        self,
        *,
        queue_depths: Callable[[], Mapping[str, int]],
        camera_health: Callable[[], Mapping[str, tuple[str, int, int]]],
        sink_state: Callable[[], Mapping[str, tuple[bool, int]]],
        ops_on_reference: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        """Register gauges read at export time.

        Args:
            queue_depths: ``{queue name: items waiting}``.
            camera_health: ``{camera: (state, reconnects, stalls)}``.
            sink_state: ``{sink name: (connected, messages buffered)}``.
            ops_on_reference: ``{op: error}``, the post-processing ops whose
                GPU kernel failed and that run on the PyTorch reference.
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

        def sink_connected(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(int(c), {"sink": s}) for s, (c, _b) in sink_state().items()]

        def sink_buffered(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(b, {"sink": s}) for s, (_c, b) in sink_state().items()]

        def reference(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(1, {"op": op}) for op in ops_on_reference()]

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
        g(
            "streamseg.segment.ops_on_reference",
            [reference],
            "1",
            "1 for each post-processing op whose GPU kernel failed and runs on the reference (op)",
        )
        g("streamseg.publish.connected", [sink_connected], "1", "1 while the sink answers (sink)")
        g(
            message_metric("buffered"),
            [sink_buffered],
            "{message}",
            MESSAGE_COUNTERS["buffered"] + " (sink)",
        )

    def observe_model(self, model: Callable[[], Mapping[str, int]]) -> None:
        """Register the model's health, read at export time.

        ``model()`` gives ``{"failed_batches", "restarts", "up"}``: batches
        the model failed so far, restarts of its own process
        (``runtime.model_process``; 0 in process), and 1 while it can take
        batches (0 while its process is being started again).
        """

        def read(key: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
            return lambda _: [Observation(int(model().get(key, 0)))]

        counter = self.meter.create_observable_counter
        counter(
            "streamseg.model.failed_batches",
            [read("failed_batches")],
            "{batch}",
            "batches the model failed (an exception, or its process ending): their frames are lost",
        )
        counter(
            "streamseg.model.restarts",
            [read("restarts")],
            "{restart}",
            "times the model's own process was started again (runtime.model_process)",
        )
        self.meter.create_observable_gauge(
            "streamseg.model.up", [read("up")], "1", "1 while the model takes batches"
        )
