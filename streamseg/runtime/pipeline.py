"""The running pipeline: stage threads joined by bounded queues.

::

    source threads (one per camera, stage "ingest")
        -> CameraQueues (live: drop oldest; file: block)
    segment thread: take_batch (stage "batch") -> Segmenter.segment (stage "segment")
        -> StageQueue "results" (block)
      (a model in its own process: the segment thread sends each batch with
      segmenter.submit and goes on; thread "segment-results" waits for each
      batch's results in order and queues them)
    track thread: TrackingStage.process per frame (stage "track")
        -> StageQueue "publish" (block)
    publish thread: encode each message once (stage "publish") -> every sink
    one thread per sink (streamseg.publish.sink): its outage buffer, writes, reconnects

Frames keep their pixels only until segmentation. Stopping (``stop()``,
SIGINT/SIGTERM) ends the sources; everything already read drains through
every stage and every sink is flushed. A pipeline of file sources ends by
itself when every file is done.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, cast

from streamseg.publish.encode import MessageEncoder
from streamseg.publish.sink import Sink
from streamseg.redact import redact_text
from streamseg.runtime.delivery import Delivery
from streamseg.runtime.protocols import (
    FrameTap,
    SegmenterLike,
    SourceLike,
    SubmittingSegmenter,
    TrackingStageLike,
)
from streamseg.runtime.queues import CameraQueues, StageQueue
from streamseg.runtime.stats import PipelineStats
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.tracing import FrameTracer
from streamseg.types import Event, Frame, FrameBatch, FrameResult, Instances

__all__ = ["STAGES", "Pipeline"]

log = logging.getLogger("streamseg.runtime")

STAGES = ("ingest", "batch", "segment", "track", "publish")

# A stage that fails this many batches in a row stops the pipeline.
MAX_CONSECUTIVE_FAILURES = 5
# Seconds before a live source whose run() returned on its own is started again.
SOURCE_RESTART_DELAY = 1.0

TrackItem = tuple[FrameResult, list[Event]]
InFlight = tuple[list[Frame], "Future[list[Instances]]", float]


class Pipeline:
    """Cameras -> batches -> segmenter -> tracking -> sinks, in threads.

    Args:
        sources: ``{camera id: Source}``.
        segmenter: runs the model on a ``FrameBatch``.
        tracker: the tracking/alerts stage, or ``None`` to pass results through.
        encoder: turns results and events into messages (JSON, once).
        sinks: where every message goes (Redis Streams, ...); names unique.
        batch_size / max_wait: batching limits (frames, seconds).
        camera_queue / results_queue / publish_queue: queue capacities.
        drain_timeout: seconds allowed to drain and flush after ``stop()``.
        metrics / tracer: telemetry (``None``: off).
        between_batches: called with the segmenter in the segment thread
            between two batches (hot swap of weights).
        on_events: called with each frame's alert events after tracking
            (clips around alerts).
        tap: the console's live view: frames of watched cameras keep their
            pixels through tracking and are offered to it.
        host_cpu: run the threads that run Python for every frame (track,
            publish and the sinks' writers) on this CPU only (``None``: no
            pinning). They take turns on the GIL anyway, and on one core the
            turns do not move their data between caches; decoding and the
            model keep every core.
    """

    def __init__(
        self,
        *,
        sources: Mapping[str, SourceLike],
        segmenter: SegmenterLike,
        tracker: TrackingStageLike | None,
        encoder: MessageEncoder,
        sinks: Sequence[Sink],
        batch_size: int,
        max_wait: float,
        camera_queue: int = 2,
        results_queue: int = 8,
        publish_queue: int = 64,
        drain_timeout: float = 15.0,
        metrics: PipelineMetrics | None = None,
        tracer: FrameTracer | None = None,
        between_batches: Callable[[SegmenterLike], object] | None = None,
        on_events: Callable[[list[Event]], None] | None = None,
        tap: FrameTap | None = None,
        host_cpu: int | None = None,
    ) -> None:
        from opentelemetry.trace import NoOpTracer

        self.sources = dict(sources)
        self.segmenter, self.tracker, self.encoder = segmenter, tracker, encoder
        self.sinks = list(sinks)
        if not self.sinks or len({s.name for s in self.sinks}) != len(self.sinks):
            raise ValueError("a pipeline needs at least one sink, each with its own name")
        self.batch_size, self.max_wait = batch_size, max_wait
        self.between_batches, self.on_events = between_batches, on_events
        self.tap = tap
        self.host_cpu = host_cpu
        self._tapped: dict[tuple[str, int], Any] = {}  # (camera, seq) -> pixels, segment -> track
        self.drain_timeout = drain_timeout
        self.metrics = metrics
        self.tracer = tracer or FrameTracer(NoOpTracer(), enabled=False)
        self.stats = PipelineStats(self.sources, metrics)
        self.stop_event = threading.Event()
        self.queues = CameraQueues(on_drop=self._on_queue_drop)
        self.camera_queue = camera_queue
        self._camera_stop: dict[str, threading.Event] = {}
        for cid, src in self.sources.items():
            self._add_queue(cid, src)
        self.results: StageQueue[FrameResult] = StageQueue("results", results_queue)
        # Batches sent to a model in its own process, waiting for their results.
        self._in_flight: StageQueue[InFlight] = StageQueue("in_flight", 2)
        self._segment_failures = 0
        self.to_publish: StageQueue[list[TrackItem]] = StageQueue("publish", publish_queue)
        self.delivery = Delivery(
            sinks=len(self.sinks), stats=self.stats, metrics=metrics, tracer=self.tracer
        )
        self._source_state: dict[str, str] = {}
        self._threads: list[threading.Thread] = []
        self._sources_lock = threading.Lock()
        self._ingest: dict[str, threading.Thread] = {}
        self._started = False
        self._done = threading.Event()
        self._stop_time: float | None = None
        self.failure: BaseException | None = None
        if metrics is not None:
            metrics.observe(
                queue_depths=self.queue_depths,
                camera_health=lambda: {
                    c: (s, r, d["stalls"]) for c, (s, r, d) in self.camera_states().items()
                },
                sink_state=self.sink_states,
                ops_on_reference=lambda: getattr(self.segmenter, "ops_on_reference", {}),
            )

    # -- control ---------------------------------------------------------
    def start(self) -> None:
        """Start every thread; the sinks connect in their own, without delaying the others."""
        with _on_cpu(self.host_cpu):  # threads inherit their creator's CPUs
            for sink in self.sinks:
                sink.start(self.delivery, tracer=self.tracer if self.tracer.enabled else None)
            self._spawn("track", self._run_track)
            self._spawn("publish", self._run_publish)
        for cid, src in self.sources.items():
            self._ingest[cid] = self._spawn(f"ingest:{cid}", self._run_source, cid, src)
        self._started = True
        if callable(getattr(self.segmenter, "submit", None)):
            # A model in its own process takes the next batch while it runs
            # this one: one thread sends batches, another takes the results.
            self._spawn("segment", self._run_submit)
            self._spawn("segment-results", self._run_collect)
        else:
            self._spawn("segment", self._run_segment)

    def stop(self) -> None:
        """Stop reading cameras; what was read still drains to the sinks."""
        with self._sources_lock:
            if not self.stop_event.is_set():
                log.info("runtime: stopping: draining in-flight frames and flushing the sinks")
                self._stop_time = time.monotonic()
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
            self._camera_stop[camera_id].set()
            thread = self._ingest.get(camera_id)
        deadline = time.monotonic() + wait
        if thread is not None:
            thread.join(wait)
        if self.queues.wait_drained(camera_id, max(0.0, deadline - time.monotonic())):
            self.queues.remove_camera(camera_id)  # its queue leaves the depth gauge
        log.info("runtime: camera %s removed", camera_id)

    def _add_queue(self, camera_id: str, source: SourceLike) -> None:
        cap = self.camera_queue if source.live else max(self.camera_queue, self.batch_size)
        self.queues.add_camera(camera_id, live=bool(source.live), capacity=cap)
        self._camera_stop[camera_id] = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the pipeline to finish; ``True`` when it did."""
        return self._done.wait(timeout)

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

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def close(self) -> None:
        """Release the stages (after ``wait``)."""
        for closer in (self.segmenter.close, getattr(self.tracker, "close", None)):
            if closer is not None:
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
            health = getattr(src, "health", None)
            state = self._source_state.get(cid) or _health_state(health)
            reconnects = int(getattr(health, "reconnects", 0) or 0)
            details = {
                "state": state,
                "since": getattr(health, "since", None),
                "live": bool(src.live),
                "reconnects": reconnects,
                "stalls": int(getattr(health, "stalls", 0) or 0),
                "frames": getattr(health, "frames", None),
                "last_frame_time": getattr(health, "last_frame_time", None),
                "last_error": _scrub(getattr(health, "last_error", None)),
            }
            out[cid] = (state, reconnects, details)
        return out

    # -- ingest ------------------------------------------------------------
    def _run_source(self, cid: str, src: SourceLike) -> None:
        def emit(frame: Frame) -> None:
            self.stats.frame_in(cid)
            frame = self.tracer.start(frame)
            if not self.queues.put(frame, self.stop_event):
                self.stats.dropped(cid, "stopping")
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
        self.stats.dropped(frame.camera_id, "queue_full")
        self.tracer.end(frame, dropped="queue_full")

    # -- batch + segment -----------------------------------------------------
    def _next_batch(self) -> list[Frame] | None:
        t0 = time.thread_time()
        frames = self.queues.take_batch(self.batch_size, self.max_wait)
        if frames is not None:
            self._record_batch(frames)
            self.stats.add_cpu("batching", time.thread_time() - t0)
        return frames

    def _run_segment(self) -> None:
        try:
            while (frames := self._next_batch()) is not None:
                run = functools.partial(self.segmenter.segment, FrameBatch(tuple(frames)))
                self._segmented(frames, run)
                self._between_batches()
        except BaseException as exc:
            self._fail("segment", exc)
        finally:
            self.results.close()

    def _run_submit(self) -> None:
        """Send each batch to the model (``segmenter.submit``) without waiting for it."""
        submitter = cast(SubmittingSegmenter, self.segmenter)
        try:
            while (frames := self._next_batch()) is not None:
                t0 = time.monotonic()
                try:
                    future = submitter.submit(FrameBatch(tuple(frames)))
                except Exception as exc:
                    future = Future()
                    future.set_exception(exc)
                self._in_flight.put((frames, future, t0))
                self._between_batches()
        except BaseException as exc:
            self._fail("segment", exc)
        finally:
            self._in_flight.close()

    def _run_collect(self) -> None:
        """Take each sent batch's results, in order, on to tracking."""
        try:
            end = False
            while not end:
                items, end = self._in_flight.get_many(1, None)
                for frames, future, t0 in items:
                    self._segmented(frames, future.result, t0)
        except BaseException as exc:
            self._fail("segment", exc)
        finally:
            self.results.close()

    def _segmented(
        self, frames: list[Frame], run: Callable[[], list[Instances]], t0: float | None = None
    ) -> None:
        """Run (or wait for) one batch and queue its results; a failed batch
        is dropped, and too many failures in a row stop the pipeline."""
        try:
            results = self._segment(frames, run, t0)
        except Exception as exc:
            self._segment_failures += 1
            self._stage_error("segment", exc)
            for f in frames:
                self.stats.dropped(f.camera_id, "segment_error")
                self.tracer.end(f, dropped="segment_error")
            if self._segment_failures >= MAX_CONSECUTIVE_FAILURES:
                self._fail("segment", exc)
            return
        self._segment_failures = 0
        cpu0 = time.thread_time()
        for r in results:
            self.results.put(r)
        self.stats.add_cpu("host_copy", time.thread_time() - cpu0)

    def _between_batches(self) -> None:
        if self.between_batches is not None:
            try:
                self.between_batches(self.segmenter)
            except Exception as exc:
                self._stage_error("segment", exc)

    def _record_batch(self, frames: Sequence[Frame]) -> None:
        now = time.time()
        with self.tracer.stage(
            "batch", frames, **{"batch.fill_wait_s": self.queues.last_fill_wait}
        ):
            pass
        if self.metrics is not None:
            self.metrics.batch_size.record(len(frames))
            self.metrics.stage_latency.record(self.queues.last_fill_wait, {"stage": "batch"})
            for f in frames:
                self.metrics.queue_wait.record(max(0.0, now - f.capture_time))

    def _segment(
        self,
        frames: Sequence[Frame],
        run: Callable[[], list[Instances]],
        t0: float | None = None,
    ) -> list[FrameResult]:
        t0, cpu0 = t0 or time.monotonic(), time.thread_time()
        elsewhere0 = getattr(self.segmenter, "cpu_seconds", 0.0)  # a model in its own process
        with self.tracer.stage("segment", frames, cameras=sorted({f.camera_id for f in frames})):
            instances = run()
        cpu1 = time.thread_time()
        elsewhere = getattr(self.segmenter, "cpu_seconds", 0.0) - elsewhere0
        self.stats.add_cpu("model", cpu1 - cpu0 + elsewhere)
        if len(instances) != len(frames):
            raise RuntimeError(
                f"segmenter returned {len(instances)} results for {len(frames)} frames"
            )
        self._stage_time("segment", t0)
        out = []
        for f, inst in zip(frames, instances, strict=True):
            self.stats.processed(f.camera_id)
            if self.tap is not None and self.tap.wants(f.camera_id):
                self._tapped[(f.camera_id, f.seq)] = f.image
            out.append(FrameResult(f.without_image(), inst))
        self.stats.add_cpu("host_copy", time.thread_time() - cpu1)
        return out

    # -- track -----------------------------------------------------------------
    def _run_track(self) -> None:
        try:
            end = False
            while not end:
                results, end = self.results.get_many(max(self.batch_size, 1) * 2, None)
                if results:
                    self.to_publish.put(self._track(results))
        except BaseException as exc:
            self._fail("track", exc)
        finally:
            self.to_publish.close()

    def _track(self, results: Sequence[FrameResult]) -> list[TrackItem]:
        t0, cpu0 = time.monotonic(), time.thread_time()
        rules0 = getattr(self.tracker, "rules_seconds", 0.0)
        out: list[TrackItem] = []
        with self.tracer.stage("track", [r.frame for r in results]):
            for r in results:
                if self.tracker is None:
                    out.append((r, []))
                    self._offer(r, [])
                    continue
                try:
                    tracked, events = self.tracker.process(r)
                except Exception as exc:
                    self._stage_error("track", exc, camera=r.frame.camera_id)
                    tracked, events = r, []
                # Before publishing: the console names each event's snapshot file.
                events = list(self._offer(tracked, events))
                out.append((tracked, events))
                if events and self.on_events is not None:
                    try:
                        self.on_events(list(events))
                    except Exception as exc:
                        self._stage_error("track", exc, camera=r.frame.camera_id)
                if self.metrics is not None:
                    for e in events:
                        self.metrics.events.add(1, {"camera": e.camera_id, "kind": e.kind})
        self._stage_time("track", t0)
        rules = getattr(self.tracker, "rules_seconds", 0.0) - rules0
        self.stats.add_cpu("rules", rules)
        self.stats.add_cpu("track", time.thread_time() - cpu0 - rules)
        return out

    def _offer(self, result: FrameResult, events: Sequence[Event]) -> Sequence[Event]:
        """Hand a watched camera's tracked frame, with its pixels, to the live view.

        Returns the events to publish: as the live view gives them back (with
        their snapshot paths), else unchanged.
        """
        image = self._tapped.pop((result.frame.camera_id, result.frame.seq), None)
        if image is None or self.tap is None:
            return events
        counts_of = getattr(self.tracker, "counts", None)
        try:
            counts = counts_of(result.frame.camera_id) if counts_of is not None else {}
            return self.tap.offer(image, result, counts, events)
        except Exception as exc:
            self._stage_error("track", exc, camera=result.frame.camera_id)
            return events

    # -- publish -----------------------------------------------------------------
    def _run_publish(self) -> None:
        try:
            end = False
            while not end:
                groups, end = self.to_publish.get_many(64, 0.5)
                items = [item for g in groups for item in g]
                if items:
                    self._publish(items)
            deadline = (self._stop_time or time.monotonic()) + self.drain_timeout
            for sink in self.sinks:  # they flush at once, each in its own thread
                sink.flush(max(1.0, deadline - time.monotonic()))
        except BaseException as exc:
            self._fail("publish", exc)
        finally:
            self._close_sinks()
            self._done.set()

    def _publish(self, items: list[TrackItem]) -> None:
        t0, cpu0 = time.monotonic(), time.thread_time()
        masks0 = self.encoder.mask_seconds
        with self.tracer.stage("publish", [r.frame for r, _ in items]):
            messages = self.encoder.encode(items)
            cpu1 = time.thread_time()
            for sink in self.sinks:
                sink.submit(messages)
        masks = self.encoder.mask_seconds - masks0
        self.stats.add_cpu("masks", masks)
        self.stats.add_cpu("json", cpu1 - cpu0 - masks)
        self.stats.add_cpu("publish", time.thread_time() - cpu1)
        self._stage_time("publish", t0)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds per stage (``stats.STAGE_CPU``), the sinks' writer threads
        counted in ``publish``."""
        out = self.stats.cpu_seconds()
        out["publish"] += sum(float(getattr(s, "cpu_seconds", 0.0)) for s in self.sinks)
        return out

    def _close_sinks(self) -> None:
        for sink in self.sinks:
            try:
                lost = sink.close()  # what is left is counted as dropped (reason: the sink)
            except Exception as exc:
                self._stage_error("publish", exc)
                continue
            if lost:
                log.warning(
                    "publish: %d messages could not reach sink %s; dropped", lost, sink.name
                )

    # -- errors ---------------------------------------------------------------------
    def _stage_time(self, stage: str, t0: float) -> None:
        if self.metrics is not None:
            self.metrics.stage_latency.record(time.monotonic() - t0, {"stage": stage})

    def _stage_error(self, stage: str, exc: BaseException, camera: str | None = None) -> None:
        where = f"{stage}[{camera}]" if camera else stage
        log.error("%s: %s", where, _scrub(f"{type(exc).__name__}: {exc}"), exc_info=exc)
        if self.metrics is not None:
            self.metrics.stage_errors.add(1, {"stage": stage})

    def _fail(self, stage: str, exc: BaseException) -> None:
        log.critical("%s: giving up after repeated failures; stopping the pipeline", stage)
        self.failure = self.failure or exc
        self.stop()


def _health_state(health: Any) -> str:
    state = getattr(health, "state", None)
    if state is None:
        return "connecting"
    return str(getattr(state, "value", state))


def _scrub(text: Any) -> Any:
    return redact_text(text) if isinstance(text, str) else text


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
