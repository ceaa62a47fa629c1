"""The running pipeline: stage threads joined by bounded queues.

::

    source threads (one per camera, stage "ingest")
        -> CameraQueues (live: drop oldest; file: block)
    segment stage (segmenting.py; threads "segment", "segment-results")
        -> StageQueue "results" (block)
    track stage (tracking.py; thread "track") -> StageQueue "publish" (block)
    publish stage (publishing.py; thread "publish", a writer thread per sink)

Frames keep their pixels only until segmentation. Stopping (``stop()``,
SIGINT/SIGTERM) ends the sources; everything already read drains through
every stage and every sink is flushed. A pipeline of file sources ends by
itself when every file is done.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from streamseg.hosting.wire import ModelProcessError
from streamseg.redact import redact_text
from streamseg.runtime.delivery import Delivery
from streamseg.runtime.pipeline_parts import (
    PipelineHooks,
    PipelineLimits,
    PipelineStages,
    PipelineTelemetry,
)
from streamseg.runtime.protocols import SourceLike
from streamseg.runtime.publishing import PublishStage
from streamseg.runtime.queues import CameraQueues, StageQueue
from streamseg.runtime.segmenting import SegmentStage, describe_error
from streamseg.runtime.stage_context import StageContext
from streamseg.runtime.stats import PipelineStats
from streamseg.runtime.tracking import TrackItem, TrackStage
from streamseg.telemetry.tracing import FrameTracer
from streamseg.types import Frame, FrameResult

__all__ = ["STAGES", "Pipeline"]

log = logging.getLogger("streamseg.runtime")

STAGES = ("ingest", "batch", "segment", "track", "publish")

# Seconds before a live source whose run() returned on its own is started again.
SOURCE_RESTART_DELAY = 1.0

_NO_HOOKS = PipelineHooks()
_NO_TELEMETRY = PipelineTelemetry()


class Pipeline:
    """Cameras -> batches -> segmenter -> tracking -> sinks, in threads.

    Args:
        sources: ``{camera id: Source}``.
        stages: the segmenter, tracker, encoder and sinks.
        limits: batching, queue capacities, drain time, the host CPU.
        hooks: between batches (hot swap), after tracking (clips), the
            console's live view.
        telemetry: metrics and tracer.
    """

    def __init__(
        self,
        *,
        sources: Mapping[str, SourceLike],
        stages: PipelineStages,
        limits: PipelineLimits,
        hooks: PipelineHooks = _NO_HOOKS,
        telemetry: PipelineTelemetry = _NO_TELEMETRY,
    ) -> None:
        from opentelemetry.trace import NoOpTracer

        self.sources = dict(sources)
        self.segmenter, self.tracker = stages.segmenter, stages.tracker
        self.encoder, self.sinks = stages.encoder, list(stages.sinks)
        self.limits, self.hooks = limits, hooks
        metrics, tap = telemetry.metrics, hooks.tap
        self.metrics = metrics
        self.tracer = telemetry.tracer or FrameTracer(NoOpTracer(), enabled=False)
        self.stats = PipelineStats(self.sources, metrics)
        self.stop_event = threading.Event()
        self.queues = CameraQueues(on_drop=self._on_queue_drop)
        self._camera_stop: dict[str, threading.Event] = {}
        for cid, src in self.sources.items():
            self._add_queue(cid, src)
        self.results: StageQueue[FrameResult] = StageQueue("results", limits.results_queue)
        self.to_publish: StageQueue[list[TrackItem]] = StageQueue("publish", limits.publish_queue)
        context = StageContext(self.stats, metrics, self.tracer, self._stage_error, self._fail)
        self.track_stage = TrackStage(
            tracker=self.tracker,
            results=self.results,
            to_publish=self.to_publish,
            context=context,
            take=max(limits.batch_size, 1) * 2,
            tap=tap,
            on_events=hooks.on_events,
        )
        self.segment_stage = SegmentStage(
            segmenter=self.segmenter,
            queues=self.queues,
            results=self.results,
            context=context,
            batch_size=limits.batch_size,
            max_wait=limits.max_wait,
            between_batches=hooks.between_batches,
            keep_pixels=self.track_stage.keep_pixels if tap is not None else None,
        )
        self.publish_stage = PublishStage(
            encoder=self.encoder,
            sinks=self.sinks,
            to_publish=self.to_publish,
            context=context,
            drain_timeout=limits.drain_timeout,
        )
        self.delivery = Delivery(
            sinks=len(self.sinks), stats=self.stats, metrics=metrics, tracer=self.tracer
        )
        self._source_state: dict[str, str] = {}
        self._threads: list[threading.Thread] = []
        self._sources_lock = threading.Lock()
        self._ingest: dict[str, threading.Thread] = {}
        self._started = False
        self.failure: BaseException | None = None
        if metrics is not None:
            metrics.observe(
                queue_depths=self.queue_depths,
                camera_health=lambda: {
                    c: (s, r, d["stalls"]) for c, (s, r, d) in self.camera_states().items()
                },
                sink_state=self.sink_states,
                ops_on_reference=lambda: dict(self.segmenter.ops_on_reference),
            )

    # -- control ---------------------------------------------------------
    def start(self) -> None:
        """Start every thread; the sinks connect in their own, without delaying the others."""
        with _on_cpu(self.limits.host_cpu):  # threads inherit their creator's CPUs
            for sink in self.sinks:
                sink.start(self.delivery, tracer=self.tracer if self.tracer.enabled else None)
            self._spawn("track", self.track_stage.run)
            self._spawn("publish", self.publish_stage.run)
        for cid, src in self.sources.items():
            self._ingest[cid] = self._spawn(f"ingest:{cid}", self._run_source, cid, src)
        self._started = True
        for name, target in self.segment_stage.threads():
            self._spawn(name, target)

    def stop(self) -> None:
        """Stop reading cameras; what was read still drains to the sinks."""
        with self._sources_lock:
            if not self.stop_event.is_set():
                log.info("runtime: stopping: draining in-flight frames and flushing the sinks")
                self.publish_stage.stopped_at = time.monotonic()
                self.stop_event.set()
            for stop in self._camera_stop.values():
                stop.set()
            self.queues.end()  # a pipeline whose cameras were all removed ends too

    def add_source(self, camera_id: str, source: SourceLike) -> None:
        """Start reading one more camera while running; the others are not disturbed.

        Raises ``ValueError`` when the id is taken or the pipeline is stopping.
        """
        with self._sources_lock:
            if self.stop_event.is_set():
                raise ValueError("the pipeline is stopping")
            if camera_id in self.sources:
                raise ValueError(f"camera {camera_id!r} is already running")
            old = self._ingest.get(camera_id)
            if old is not None and old.is_alive():
                raise ValueError(f"camera {camera_id!r} is still stopping; try again")
            self.stats.add_camera(camera_id)
            self._add_queue(camera_id, source)
            self._source_state.pop(camera_id, None)
            self.sources[camera_id] = source
            if self._started:
                name = f"ingest:{camera_id}"
                self._ingest[camera_id] = self._spawn(name, self._run_source, camera_id, source)
        log.info("runtime: camera %s added", camera_id)

    def remove_source(self, camera_id: str, *, wait: float = 10.0) -> None:
        """Stop reading one camera; its frames already read still go through.

        Waits up to ``wait`` seconds for its source to return. Raises
        ``KeyError`` for an unknown camera. The other cameras are not disturbed.
        """
        with self._sources_lock:
            self.sources.pop(camera_id)
            self.queues.removing(camera_id)  # the last camera removed ends nothing
            self._camera_stop[camera_id].set()
            thread = self._ingest.get(camera_id)
        deadline = time.monotonic() + wait
        if thread is not None:
            thread.join(wait)
        if self.queues.wait_drained(camera_id, max(0.0, deadline - time.monotonic())):
            self.queues.remove_camera(camera_id)  # its queue leaves the depth gauge
        self.track_stage.forget_camera(camera_id)
        log.info("runtime: camera %s removed", camera_id)

    def _add_queue(self, camera_id: str, source: SourceLike) -> None:
        lim = self.limits
        cap = lim.camera_queue if source.live else max(lim.camera_queue, lim.batch_size)
        self.queues.add_camera(camera_id, live=bool(source.live), capacity=cap)
        self._camera_stop[camera_id] = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the pipeline to finish; ``True`` when it did."""
        return self.publish_stage.done.wait(timeout)

    def join(self, timeout: float = 30.0) -> None:
        """Wait, at most ``timeout`` seconds in all, for every stage thread to end.

        ``wait`` returns once the sinks are flushed; the other stage threads
        may still be unwinding then. A process that exits right after must
        join them first: a daemon thread still inside torch when the
        interpreter shuts down aborts the process.
        """
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def running_stages(self) -> list[str]:
        """Names of the stage threads still running (``ingest:<camera>``, ``track``, ...)."""
        return [t.name for t in self._threads if t.is_alive()]

    def close(self) -> None:
        """Release the stages (after ``wait``)."""
        for closer in (self.segmenter.close, self.tracker.close):
            try:
                closer()
            except Exception:
                log.exception("runtime: closing a stage failed")

    def _spawn(self, name: str, target: Any, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    # -- state -------------------------------------------------------------
    def queue_depths(self) -> dict[str, int]:
        depths = {f"camera:{c}": n for c, n in self.queues.depths().items()}
        depths["results"] = self.results.depth()
        depths["publish"] = self.to_publish.depth()
        return depths

    def sink_states(self) -> dict[str, tuple[bool, int]]:
        """``{sink name: (connected, messages buffered)}``."""
        return {s.name: (h.connected, h.buffered) for s in self.sinks for h in [s.health()]}

    def camera_states(self) -> dict[str, tuple[str, int, dict[str, Any]]]:
        """``{camera: (state, reconnects, details)}`` from the sources' health."""
        out = {}
        for cid, src in list(self.sources.items()):
            health = src.health
            state = self._source_state.get(cid) or str(health.state)
            details = {
                "state": state,
                "since": health.since,
                "live": bool(src.live),
                "reconnects": health.reconnects,
                "stalls": health.stalls,
                "frames": health.frames,
                "last_frame_time": health.last_frame_time,
                "last_error": health.last_error and redact_text(health.last_error),
            }
            out[cid] = (state, health.reconnects, details)
        return out

    def frame_size(self, camera_id: str) -> tuple[int, int] | None:
        """``(H, W)`` of the camera's last tracked frame, ``None`` before its first."""
        return self.track_stage.frame_size(camera_id)

    # -- ingest ------------------------------------------------------------
    def _run_source(self, cid: str, src: SourceLike) -> None:
        def emit(frame: Frame) -> None:
            self.stats.read(cid)
            frame = self.tracer.start(frame)
            if not self.queues.put(frame, self.stop_event):
                self.stats.skipped(cid, "stopping")
                self.tracer.end(frame, dropped="stopping")

        stop = self._camera_stop[cid]  # set by stop() and by remove_source(cid)
        try:
            while not stop.is_set():
                t0 = time.thread_time()
                try:
                    src.run(emit, stop)
                except Exception as exc:
                    self._stage_error("ingest", exc, camera=cid)
                    if not src.live:
                        self._source_state[cid] = "failed"
                        break
                finally:
                    self.stats.add_cpu("decode", time.thread_time() - t0)
                if not src.live or stop.wait(SOURCE_RESTART_DELAY):
                    break
                log.warning("ingest[%s]: source returned while running; restarting it", cid)
            self._source_state.setdefault(cid, "finished" if not src.live else "stopped")
        finally:
            self.queues.close_camera(cid)
            log.info("ingest[%s]: source ended", cid)

    def _on_queue_drop(self, frame: Frame) -> None:
        """The live-camera policy: the camera's oldest waiting frame gives way."""
        self.stats.skipped(frame.camera_id, "queue_full")
        self.tracer.end(frame, dropped="queue_full")

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds per stage (``stats.STAGE_CPU``), the sinks' writer threads
        counted in ``publish`` (each ``BufferedSink`` counts its own)."""
        out = self.stats.cpu_seconds()
        out["publish"] += self.publish_stage.writer_cpu_seconds()
        return out

    # -- errors ---------------------------------------------------------------------
    @property
    def drain_timeout(self) -> float:
        """Seconds allowed to drain and flush after ``stop()``."""
        return self.publish_stage.drain_timeout

    @property
    def stopped_at(self) -> float | None:
        """When ``stop()`` was first called (``time.monotonic()``), else ``None``."""
        return self.publish_stage.stopped_at

    def _stage_error(self, stage: str, exc: BaseException, camera: str | None = None) -> None:
        where = f"{stage}[{camera}]" if camera else stage
        # A traceback that says nothing (a model process that ended) is left out.
        trace = None if isinstance(exc, ModelProcessError) else exc
        log.error("%s: %s", where, redact_text(describe_error(exc)), exc_info=trace)
        if self.metrics is not None:
            self.metrics.stage_errors.add(1, {"stage": stage})

    def _fail(self, stage: str, exc: BaseException) -> None:
        log.critical(
            "%s: giving up: %s; stopping the pipeline", stage, redact_text(describe_error(exc))
        )
        self.failure = self.failure or exc
        self.stop()


@contextlib.contextmanager
def _on_cpu(cpu: int | None) -> Iterator[None]:
    """The calling thread runs on ``cpu`` only meanwhile (so do the threads it starts,
    which keep that); ``None``: nothing changes."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
