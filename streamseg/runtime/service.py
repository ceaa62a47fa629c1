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
from collections.abc import Sequence
from typing import Any, TextIO

from streamseg.config.pipeline import PipelineConfig
from streamseg.fleet.worker import FleetWorker
from streamseg.hosting.build import build_model_stage
from streamseg.hosting.health import model_counts, model_health
from streamseg.ingest.config import CameraConfig
from streamseg.runtime.camera_changes import forget_camera, swap_source
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
from streamseg.runtime.protocols import SegmenterLike, Tracker
from streamseg.runtime.readiness import log_summary, readiness
from streamseg.runtime.signals import StopSignals
from streamseg.runtime.sink_feeds import feed_sinks
from streamseg.runtime.status import StatusReporter, unfinished
from streamseg.telemetry.http import HealthServer
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.setup import Telemetry
from streamseg.telemetry.tracing import FrameTracer

__all__ = ["Service"]

log = logging.getLogger("streamseg.runtime")


class Service:
    """Everything ``streamseg serve`` runs, built from one ``PipelineConfig``.

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
        self.cameras = list(config.cameras if cameras is None else cameras)
        self.status_stream = status_stream
        self.handle_signals = handle_signals
        self.pipeline: Pipeline | None = None
        self.http: HealthServer | None = None
        self.live: Any = None  # streamseg.console.live.LiveView while the console is on
        self.events: Any = None  # streamseg.console.events.EventLog (alert snapshots)
        self._snapshot_tmp: Any = None  # the snapshots' temporary folder, removed at exit
        self.model_loaded = False
        self.region_classes: tuple[str, ...] | None = None  # once the model is built
        self._hooks: list[Any] = []  # swap controller, clip hook: closed at exit
        self.swap: Any = None  # streamseg.runtime.hotswap.SwapController while hot swap is on
        self.clips: Any = None  # streamseg.record.clips.ClipHook while alert clips are on
        self._cameras_lock = threading.Lock()
        self.fleet: FleetWorker | None = None  # this worker's part of a fleet (``fleet:``)
        if config.fleet is not None:
            self.fleet = FleetWorker(
                config=config.fleet, redis=config.redis, host=self, seeds=self.cameras
            )
            self.cameras = []  # the fleet's placement decides
        self._stop = threading.Event()

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
            if self.events is not None:
                self.events.close()
            if self._snapshot_tmp is not None:
                self._snapshot_tmp.cleanup()
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

    # -- cameras while running (the console's API) -----------------------------
    def add_camera(self, cam: CameraConfig) -> None:
        """Serve one more camera (in a fleet: add it to the fleet's list, its owner starts it)."""
        (self.fleet.add_camera if self.fleet is not None else self.start_camera)(cam)

    def remove_camera(self, camera_id: str) -> None:
        """Stop serving one camera (in a fleet: remove it from the fleet's list)."""
        (self.fleet.remove_camera if self.fleet is not None else self.stop_camera)(camera_id)

    def start_camera(self, cam: CameraConfig) -> None:
        """Start serving one more camera here without disturbing the others.

        Before the pipeline exists it is simply added to the cameras to
        open. Raises ``ValueError`` (the id is taken, the service stops).
        """
        with self._cameras_lock:
            if any(c.id == cam.id for c in self.cameras):
                raise ValueError(f"camera {cam.id!r} is already served")
            if self.pipeline is not None:
                self.pipeline.add_source(cam.id, self._open_cameras([cam])[cam.id])
            self.cameras.append(cam)

    def stop_camera(self, camera_id: str) -> None:
        """Stop serving one camera here; its frames already read still reach the sinks, then
        every part that kept state for it forgets it (``runtime.camera_changes``)."""
        with self._cameras_lock:
            if not any(c.id == camera_id for c in self.cameras):
                raise KeyError(camera_id)
            if self.pipeline is not None and camera_id in self.pipeline.sources:
                self.pipeline.remove_source(camera_id)
                forget_camera(self, camera_id)
            self.cameras = [c for c in self.cameras if c.id != camera_id]

    def replace_camera(self, cam: CameraConfig) -> None:
        """Serve ``cam`` instead of the camera of its id, the others undisturbed; a change
        that fails leaves the old one running (``runtime.camera_changes.swap_source``).
        Raises ``KeyError`` (no such camera), ``SourceError``, ``ValueError``."""
        with self._cameras_lock:
            ids = [c.id for c in self.cameras]
            if cam.id not in ids:
                raise KeyError(cam.id)
            at = ids.index(cam.id)
            old, p = self.cameras[at], self.pipeline
            if p is not None:
                swap_source(p, cam.id, opener=self._open_camera, new=cam, old=old,
                            forget=lambda cid: forget_camera(self, cid))  # fmt: skip
            self.cameras[at] = cam

    def camera_states(self) -> dict[str, str]:
        """``{camera: state}`` of the cameras served here (``connecting`` before the model)."""
        p = self.pipeline
        if p is None:
            return {c.id: "connecting" for c in self.cameras}
        return {cid: state for cid, (state, _r, _d) in p.camera_states().items()}

    def _console(self) -> Any:
        """The console's ``setup(app)`` (``streamseg.runtime.console.build_console``)."""
        from streamseg.runtime.console import build_console, event_log

        if self.config.http.snapshots:
            self.events, self._snapshot_tmp = event_log(self.config.http)
        self.live, install = build_console(self, events=self.events)
        return install

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
            self.region_classes = region_classes_of(segmenter)
            tracker = build_tracker(  # RuleError: exit 2
                self.config, segmenter.class_names, self.region_classes
            )
            built.callback(tracker.close)
            self.model_loaded = True
            if self.events is not None:
                self.events.class_names = tuple(segmenter.class_names)
            metrics = PipelineMetrics(telemetry.meter)
            swap = self.swap = build_swap_controller(
                self.config, on_refused=lambda why: metrics.swap_refused.add(1, {"reason": why})
            )
            clips = self.clips = build_clip_hook(self.config, meter=telemetry.meter)
            self._hooks = [h for h in (swap, clips) if h is not None]
            built.callback(self._close_hooks)
            with self._cameras_lock:
                sources = self._open_cameras(self.cameras)
                self.pipeline = self._new_pipeline(
                    telemetry, segmenter, tracker, sources, metrics, swap, clips
                )
            feed_sinks(self, self.pipeline)  # camera health, alert snapshots: sinks that take them
            metrics.observe_model(lambda: model_counts(self.model_health()))
            built.pop_all()  # the pipeline owns the stages now, run() the hooks
        return self.pipeline

    def _close_hooks(self) -> None:
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            try:
                hook.close()
            except Exception:
                log.exception("runtime: closing %s failed", type(hook).__name__)

    def _open_camera(self, cam: CameraConfig) -> Any:
        return self._open_cameras([cam])[cam.id]

    def _open_cameras(self, cams: Sequence[CameraConfig]) -> dict[str, Any]:
        """Sources of ``cams`` as the pipeline reads them (decode device, clip packets)."""
        device = decode_device(self.config, cams)
        on_packet = self.clips.on_packet if self.clips is not None else None
        return {cam.id: open_camera(cam, device=device, on_packet=on_packet) for cam in cams}

    def _new_pipeline(
        self,
        telemetry: Telemetry,
        segmenter: SegmenterLike,
        tracker: Tracker,
        sources: dict[str, Any],
        metrics: PipelineMetrics,
        swap: Any,
        clips: Any,
    ) -> Pipeline:
        return build_pipeline(
            self.config,
            segmenter=segmenter,
            tracker=tracker,
            sources=sources,
            metrics=metrics,
            tracer=FrameTracer(telemetry.tracer, enabled=telemetry.traces_enabled),
            between_batches=swap.apply_pending if swap is not None else None,
            on_events=clips.on_events if clips is not None else None,
            tap=self.live,
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
