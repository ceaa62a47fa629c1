"""The pipeline's segment stage: batches from the camera queues through the model.

::

    CameraQueues -> take_batch (stage "batch") -> segmenter.submit (stage "segment")
        -> in flight (up to IN_FLIGHT batches) -> results queue (block)

One loop for every model: thread ``segment`` takes each batch and hands it
to ``segmenter.submit``, which returns a future of its instances; thread
``segment-results`` waits for each batch's future, in order, and queues its
results for tracking. A model in this process runs the batch inside
``submit`` (its future is done when ``submit`` returns); a model in its own
process (``runtime.model_process``) returns once the batch is sent, so it
gets the next batch while it runs this one.

A batch the model fails (an exception, in this process or in the model's
own, or that process ending) loses its frames: they are counted as lost
(reason ``segment_error``), the error is logged with its type and message
and kept in :meth:`SegmentStage.health`; ``MAX_FAILED_IN_A_ROW`` failed
batches in a row stop the pipeline with that error (the frames still queued
then are lost without asking the model again).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from streamseg.runtime.protocols import SegmenterLike
from streamseg.runtime.queues import CameraQueues, StageQueue
from streamseg.runtime.stage_context import StageContext
from streamseg.types import Frame, FrameBatch, FrameResult, Instances

__all__ = ["IN_FLIGHT", "MAX_FAILED_IN_A_ROW", "SegmentStage", "describe_error"]

log = logging.getLogger("streamseg.runtime")

# The model failing this many batches in a row stops the pipeline.
MAX_FAILED_IN_A_ROW = 5
# Batches handed to the model whose results are not queued yet.
IN_FLIGHT = 2


@dataclasses.dataclass(frozen=True)
class InFlight:
    """A batch handed to the model: its frames, its future, when it was handed
    over (``time.monotonic()``, and epoch nanoseconds for its span)."""

    frames: list[Frame]
    future: Future[list[Instances]]
    sent: float
    sent_ns: int


def describe_error(exc: BaseException) -> str:
    """``Type: message``, as logs, ``/readyz`` and exit messages name an error."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SegmentStage:
    """Batches of the camera queues, segmented, onto ``results``.

    Args:
        segmenter: the model (``submit``: a future of a batch's instances).
        queues / results: where frames come from and results go.
        context: the pipeline's stats, metrics, tracer and failure reports
            (``on_error``: an error survived; ``on_fail``: stop the pipeline).
        batch_size / max_wait: batching limits (frames, seconds).
        between_batches: called with the segmenter between two batches
            (hot swap).
        keep_pixels: called with each segmented frame whose pixels the
            console's live view wants after tracking (``None``: none does).
    """

    def __init__(
        self,
        *,
        segmenter: SegmenterLike,
        queues: CameraQueues,
        results: StageQueue[FrameResult],
        context: StageContext,
        batch_size: int,
        max_wait: float,
        between_batches: Callable[[SegmenterLike], object] | None,
        keep_pixels: Callable[[Frame], None] | None,
    ) -> None:
        self.segmenter = segmenter
        self.queues, self.results = queues, results
        self.stats, self.metrics, self.tracer = context.stats, context.metrics, context.tracer
        self.batch_size, self.max_wait = batch_size, max_wait
        self.between_batches, self.keep_pixels = between_batches, keep_pixels
        self.on_error, self.on_fail = context.on_error, context.on_fail
        # Batches handed to the model, waiting for their results.
        self._in_flight: StageQueue[InFlight] = StageQueue("in_flight", IN_FLIGHT)
        self._model_cpu = segmenter.cpu_seconds  # as of the last batch queued
        self._lock = threading.Lock()
        self.failed_batches = 0
        self.failed_in_a_row = 0
        self.last_error: str | None = None
        self.last_error_time: float | None = None  # time.time()

    def threads(self) -> list[tuple[str, Callable[[], None]]]:
        """``(thread name, target)`` of the threads that run this stage."""
        return [("segment", self._run_submit), ("segment-results", self._run_collect)]

    def health(self) -> dict[str, Any]:
        """``failed_batches`` (in all), ``failed_in_a_row``, ``last_error``
        (``Type: message``) and ``last_error_time`` (epoch seconds)."""
        with self._lock:
            return {
                "failed_batches": self.failed_batches,
                "failed_in_a_row": self.failed_in_a_row,
                "last_error": self.last_error,
                "last_error_time": self.last_error_time,
            }

    # -- threads -------------------------------------------------------------
    def _next_batch(self) -> list[Frame] | None:
        t0 = time.thread_time()
        frames = self.queues.take_batch(self.batch_size, self.max_wait)
        if frames is not None:
            self._record_batch(frames)
            self.stats.add_cpu("batching", time.thread_time() - t0)
        return frames

    def _run_submit(self) -> None:
        """Hand each batch to the model (``segmenter.submit``) and go on to the next."""
        try:
            while (frames := self._next_batch()) is not None:
                if self._gave_up(frames):
                    continue
                sent, sent_ns = time.monotonic(), time.time_ns()
                try:
                    future = self.segmenter.submit(FrameBatch(tuple(frames)))
                except Exception as exc:  # e.g. its process could not be started again
                    future = Future()
                    future.set_exception(exc)
                self._in_flight.put(InFlight(frames, future, sent, sent_ns))
                self._between_batches()
        except BaseException as exc:
            self.on_fail("segment", exc)
        finally:
            self._in_flight.close()

    def _run_collect(self) -> None:
        """Take each sent batch's results, in order, on to tracking."""
        try:
            end = False
            while not end:
                items, end = self._in_flight.get_many(1, None)
                for batch in items:
                    self._segmented(batch)
        except BaseException as exc:
            self.on_fail("segment", exc)
        finally:
            self.results.close()

    # -- one batch -----------------------------------------------------------------
    def _segmented(self, batch: InFlight) -> None:
        """Wait for one batch and queue its results; a failed batch is lost,
        and too many failures in a row stop the pipeline."""
        try:
            results = self._segment(batch)
        except Exception as exc:
            self._failed(batch.frames, exc)
            return
        with self._lock:
            self.failed_in_a_row = 0
        cpu0 = time.thread_time()
        for r in results:
            self.results.put(r)
        self.stats.add_cpu("host_copy", time.thread_time() - cpu0)

    def _failed(self, frames: Sequence[Frame], exc: Exception) -> None:
        with self._lock:
            self.failed_batches += 1
            self.failed_in_a_row += 1
            self.last_error, self.last_error_time = describe_error(exc), time.time()
            in_a_row = self.failed_in_a_row
        self.on_error("segment", exc, None)
        for f in frames:
            self.stats.lost(f.camera_id, "segment_error")
            self.tracer.end(f, dropped="segment_error")
        if in_a_row == MAX_FAILED_IN_A_ROW:  # once; frames already queued still drain
            log.critical(
                "segment: the model failed %d batches in a row (last: %s)",
                in_a_row,
                self.last_error,
            )
            self.on_fail("segment", exc)

    def _gave_up(self, frames: Sequence[Frame]) -> bool:
        """After the pipeline gave up on the model, the frames still queued are
        lost without asking it (it would only fail them, slowly)."""
        with self._lock:
            gave_up = self.failed_in_a_row >= MAX_FAILED_IN_A_ROW
        if gave_up:
            for f in frames:
                self.stats.lost(f.camera_id, "segment_error")
                self.tracer.end(f, dropped="segment_error")
        return gave_up

    def _between_batches(self) -> None:
        if self.between_batches is not None:
            try:
                self.between_batches(self.segmenter)
            except Exception as exc:
                self.on_error("segment", exc, None)

    def _record_batch(self, frames: Sequence[Frame]) -> None:
        now = time.time()
        fill: dict[str, Any] = {"batch.fill_wait_s": self.queues.last_fill_wait}
        with self.tracer.stage("batch", frames, **fill):
            pass
        if self.metrics is not None:
            self.metrics.batch_size.record(len(frames))
            self.metrics.stage_latency.record(self.queues.last_fill_wait, {"stage": "batch"})
            for f in frames:
                self.metrics.queue_wait.record(max(0.0, now - f.capture_time))

    def _segment(self, batch: InFlight) -> list[FrameResult]:
        frames = batch.frames
        cameras = sorted({f.camera_id for f in frames})
        with self.tracer.stage("segment", frames, start_time=batch.sent_ns, cameras=cameras):
            instances = batch.future.result()
        cpu1 = time.thread_time()
        model_cpu = self.segmenter.cpu_seconds  # this batch's, and any other's since the last
        self.stats.add_cpu("model", model_cpu - self._model_cpu)
        self._model_cpu = model_cpu
        if len(instances) != len(frames):
            raise RuntimeError(
                f"segmenter returned {len(instances)} results for {len(frames)} frames"
            )
        if self.metrics is not None:
            self.metrics.stage_latency.record(time.monotonic() - batch.sent, {"stage": "segment"})
        out = []
        for f, inst in zip(frames, instances, strict=True):
            self.stats.segmented(f.camera_id, f.capture_time)
            if self.keep_pixels is not None:
                self.keep_pixels(f)
            out.append(FrameResult(f.without_image(), inst))
        self.stats.add_cpu("host_copy", time.thread_time() - cpu1)
        return out
