"""``streamseg serve``: a pipeline plus its HTTP endpoint, telemetry, signals and status.

``Service(config).run()`` returns the process exit code: 0 after a clean
stop (SIGINT/SIGTERM, or every file source done), 1 when a stage failed or
the drain did not finish in ``runtime.drain_timeout``. A second signal
while draining exits at once with 130 (one that comes within a second of
the first is taken for the same request, delivered twice).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from streamseg.config.pipeline import PipelineConfig
from streamseg.fleet.worker import FleetWorker
from streamseg.hosting.build import build_model_stage
from streamseg.hosting.health import model_counts, model_health
from streamseg.ingest.config import CameraConfig
from streamseg.runtime.camera_changes import ServedCameras
from streamseg.runtime.factory import (
    build_clip_hook,
    build_pipeline,
    build_swap_controller,
    build_tracker,
    check_rules_early,
    decode_device,
    open_camera,
    region_classes_of,
)
from streamseg.runtime.pipeline import Pipeline
from streamseg.runtime.protocols import SourceLike, TrackingLike
from streamseg.runtime.readiness import log_summary, readiness
from streamseg.runtime.signals import StopSignals
from streamseg.runtime.sink_feeds import SinkFeeds
from streamseg.runtime.status import StatusReporter, unfinished
from streamseg.telemetry.http import HealthServer
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.setup import Telemetry
from streamseg.telemetry.tracing import FrameTracer

if TYPE_CHECKING:
    from streamseg.hosting.process import ModelProcess
    from streamseg.record.clips import ClipHook
    from streamseg.runtime.console import ServiceConsole
    from streamseg.runtime.hotswap import SwapController
    from streamseg.segment.segmenter import Segmenter

__all__ = ["Service"]

log = logging.getLogger("streamseg.runtime")


class Service:
    """Everything ``streamseg serve`` runs, built from one ``PipelineConfig``.

    It is composed of parts that own their state: the cameras served here and
    the changes to them (``served``: ``runtime.camera_changes.ServedCameras``,
    also the fleet's ``CameraHost``), the console (``console``:
    ``runtime.console.ServiceConsole``, with its live view and snapshot log),
    the fleet worker (``fleet``) and, once the model is loaded, the pipeline
    and the sinks' other feeds (``runtime.sink_feeds.SinkFeeds``).

    Args:
        config: the validated pipeline.yaml.
        cameras: the cameras this process serves (a shard); default all.
        status_stream: where the status line goes (default stderr).
        handle_signals: install SIGINT/SIGTERM handlers (main thread only).
        pipeline_path: the file ``config`` came from; the console saves its
            changes there (``None``: the console cannot change anything).
    """

    def __init__(
        self,
        config: PipelineConfig,
        *,
        cameras: Sequence[CameraConfig] | None = None,
        status_stream: TextIO | None = None,
        handle_signals: bool = True,
        pipeline_path: str | None = None,
    ) -> None:
        self.config = config
        self.pipeline_path = pipeline_path
        seeds = list(config.cameras if cameras is None else cameras)
        self.status_stream = status_stream
        self.handle_signals = handle_signals
        self.pipeline: Pipeline | None = None
        self.http: HealthServer | None = None
        self.console: ServiceConsole | None = None  # while http.console is on
        self.model_loaded = False
        self._hooks: list[Any] = []  # swap controller, clip hook: closed at exit
        self.swap: SwapController | None = None  # while hot swap is on
        self.clips: ClipHook | None = None  # while alert clips are on
        # In a fleet, the fleet's placement decides which cameras are served here.
        self.served = ServedCameras(
            [] if config.fleet is not None else seeds, opener=self._open_cameras
        )
        self.fleet: FleetWorker | None = None  # this worker's part of a fleet (``fleet:``)
        if config.fleet is not None:
            self.fleet = FleetWorker(
                config=config.fleet, redis=config.redis, host=self.served, seeds=seeds
            )
        self._stop = threading.Event()

    @property
    def cameras(self) -> list[CameraConfig]:
        """The cameras served here now (``served.cameras``)."""
        return self.served.cameras

    def run(self) -> int:
        t = self.config.telemetry
        telemetry = Telemetry(
            service_name=t.service_name,
            traces=t.traces,
            metrics=t.metrics,
            otlp_endpoint=t.otlp_endpoint,
            export_interval=t.export_interval,
            trace_sample_ratio=t.trace_sample_ratio,
        )
        signals = StopSignals(self.stop, enabled=self.handle_signals)
        old_handlers = signals.install()
        try:
            self._start_http(telemetry)
            pipeline = self._build(telemetry)
            if pipeline is None:
                return 0
            return self._run_pipeline(pipeline)
        finally:
            signals.restore(old_handlers)
            if self.fleet is not None:
                self.fleet.close()
            self._close_hooks()
            if self.http is not None:
                self.http.close()
            if self.console is not None:
                self.console.close()
            telemetry.shutdown()

    def stop(self) -> None:
        """Drain and exit (a SIGTERM); a fleet worker first releases its cameras."""
        self._stop.set()
        if self.fleet is not None:
            self.fleet.close()
        if self.pipeline is not None:
            self.pipeline.stop()

    # -- building ----------------------------------------------------------
    def _start_http(self, telemetry: Telemetry) -> None:
        h = self.config.http
        if h.enabled:
            metrics = telemetry.metrics_text if telemetry.prometheus_registry is not None else None
            self.http = HealthServer(
                host=h.host,
                port=h.port,
                readiness=self.readiness,
                metrics=metrics,
                setup=self._console() if h.console else None,
            ).start()
        port = self.config.telemetry.prometheus_port
        if port is not None:
            telemetry.start_prometheus_server(port, host=h.host)

    def _console(self) -> Callable[[Any], None]:
        """The console's ``setup(app)`` for the web server (``runtime.console``)."""
        from streamseg.runtime.console import ServiceConsole

        self.console = ServiceConsole(
            self.config,
            cameras=self.served,
            readiness=self.readiness,
            fleet=self.fleet,
            pipeline_path=self.pipeline_path,
        )
        return self.console.install

    def _build(self, telemetry: Telemetry) -> Pipeline | None:
        """Build every stage; ``None`` when asked to stop meanwhile.

        Start-up owns what it builds: when a step fails (or a stop comes),
        everything built before it is closed, the model's own process
        included, before the error leaves. What can be checked without the
        model (rule classes the config or checkpoint names) is checked
        before the model starts; the rest before a camera is opened.
        """
        import torch

        from streamseg.hosting.memory import keep_heap_memory
        from streamseg.hosting.process import StartCancelled

        keep_heap_memory()  # before the model's first batch (hosting/memory.py)
        torch.set_num_threads(self.config.runtime.inference_threads())
        check_rules_early(self.config)
        if self.config.tracking.enabled or self.config.alerts.enabled:
            # Its imports (the native ops) take seconds: paid before the model
            # starts, so that a rule the built model cannot run stops serve at once.
            import streamseg.track.stage  # noqa: F401
        with contextlib.ExitStack() as built:
            try:
                segmenter = build_model_stage(self.config, cancel=self._stop)
            except StartCancelled:
                return None
            built.callback(segmenter.close)
            if self._stop.is_set():
                return None
            region_classes = region_classes_of(segmenter)
            tracker = build_tracker(  # RuleError: exit 2
                self.config, segmenter.class_names, region_classes
            )
            built.callback(tracker.close)
            self.model_loaded = True
            metrics = PipelineMetrics(telemetry.meter)
            swap = self.swap = build_swap_controller(
                self.config, on_refused=lambda why: metrics.swap_refused.add(1, {"reason": why})
            )
            clips = self.clips = build_clip_hook(self.config, meter=telemetry.meter)
            self._hooks = [h for h in (swap, clips) if h is not None]
            built.callback(self._close_hooks)
            console = self.console
            forget = [clips.remove_camera] if clips is not None else []  # besides the tracker
            if console is not None:
                forget.append(console.live.forget)
            pipeline = self.pipeline = self.served.open_into(
                lambda sources: self._new_pipeline(
                    telemetry, segmenter, tracker, sources, metrics, swap, clips
                ),
                forget=forget,
            )
            if console is not None:
                console.attach(pipeline, swap=swap, clips=clips, region_classes=region_classes)
            self._feed_sinks(pipeline)
            metrics.observe_model(lambda: model_counts(self.model_health()))
            built.pop_all()  # the pipeline owns the stages now, run() the hooks
        return self.pipeline

    def _feed_sinks(self, pipeline: Pipeline) -> None:
        """Camera health, recording's alerts, snapshots: to the sinks that take them."""
        feeds = SinkFeeds(
            pipeline.sinks,
            health=lambda: {cid: d for cid, (_s, _r, d) in pipeline.camera_states().items()},
            count_untracked=not self.config.tracking.enabled,
        )
        console = self.console
        feeds.connect(clips=self.clips, events=console.events if console is not None else None)

    def _close_hooks(self) -> None:
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            try:
                hook.close()
            except Exception:
                log.exception("runtime: closing %s failed", type(hook).__name__)

    def _open_cameras(self, cams: Sequence[CameraConfig]) -> dict[str, SourceLike]:
        """Sources of ``cams`` as the pipeline reads them (decode device, clip packets)."""
        device = decode_device(self.config, cams)
        on_packet = self.clips.on_packet if self.clips is not None else None
        return {cam.id: open_camera(cam, device=device, on_packet=on_packet) for cam in cams}

    def _new_pipeline(
        self,
        telemetry: Telemetry,
        segmenter: Segmenter | ModelProcess,
        tracker: TrackingLike,
        sources: dict[str, SourceLike],
        metrics: PipelineMetrics,
        swap: SwapController | None,
        clips: ClipHook | None,
    ) -> Pipeline:
        return build_pipeline(
            self.config,
            segmenter=segmenter,
            tracker=tracker,
            sources=sources,
            metrics=metrics,
            tracer=FrameTracer(telemetry.tracer, enabled=telemetry.traces_enabled),
            # hot swap loads weights into the model built here, between two batches
            between_batches=(lambda _: swap.apply_pending(segmenter)) if swap is not None else None,
            on_events=clips.on_events if clips is not None else None,
            tap=self.console.live if self.console is not None else None,
            stamp=self.fleet.stamp if self.fleet is not None else None,
            fence=self.fleet.admits if self.fleet is not None else None,
        )

    # -- running -----------------------------------------------------------
    def _run_pipeline(self, pipeline: Pipeline) -> int:
        status = StatusReporter(
            stats=pipeline.stats,
            states=lambda: {c: s for c, (s, _r, _d) in pipeline.camera_states().items()},
            sinks=pipeline.sink_states,
            interval=self.config.runtime.status_interval,
            stream=self.status_stream,
        )
        pipeline.start()
        if self.fleet is not None and not self._stop.is_set():
            self.fleet.start()  # once the model runs: a camera taken is served at once
        status.start()
        log.info(
            "runtime: running %d camera(s): %s",
            len(self.cameras),
            ", ".join(c.id for c in self.cameras),
        )
        if self._stop.is_set():
            pipeline.stop()
        try:
            finished = self._wait(pipeline)
        finally:
            status.close()
        if not finished:
            log.error(
                "runtime: drain did not finish within %.0fs (runtime.drain_timeout): %s",
                pipeline.drain_timeout,
                unfinished(
                    pipeline.stats.snapshot(), pipeline.sink_states(), pipeline.running_stages()
                ),
            )
        log_summary(pipeline)
        pipeline.close()
        return 1 if not finished or pipeline.failure is not None else 0

    def _wait(self, pipeline: Pipeline) -> bool:
        while not pipeline.wait(0.2):
            stop_time = pipeline.stopped_at
            if stop_time is not None and time.monotonic() - stop_time > pipeline.drain_timeout + 2:
                return False
        return True

    def model_health(self) -> dict[str, Any]:
        """``/readyz``'s ``model`` (``streamseg.hosting.health``)."""
        return model_health(self.pipeline, loaded=self.model_loaded, arch=self.config.model.arch)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """``(ready, details)`` for ``/readyz``.

        Ready: the model runs (loaded, not being restarted), every sink
        answers, at least one camera is streaming (or a file is done) and the
        service is not stopping. ``model``: ``streamseg.hosting.health``;
        ``cameras[id].counts``: the frame counters and ``sinks``: ``{name:
        {type, connected, buffered, published, lost, errors, reconnects}}``,
        in the words of ``streamseg.telemetry.counters``. ``status``:
        ``degraded`` while a part is off and the rest runs (``degraded`` says
        which), else ``ok``; degraded is still ready
        (``streamseg.runtime.readiness``).
        """
        p = self.pipeline
        stopping = self._stop.is_set() or (p is not None and p.stop_event.is_set())
        clips = self.clips
        return readiness(
            p,
            self.cameras,
            self.config.sinks,
            model=self.model_health(),
            stopping=stopping,
            recording=(lambda ids: clips.health(cameras=ids)) if clips is not None else None,
            idle_ready=self.fleet is not None and self.fleet.joined,  # a worker with room
        )
