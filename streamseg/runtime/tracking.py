"""The pipeline's track stage: tracking and alert rules per frame, the live view's frames.

::

    results queue -> TrackingLike.process per frame (stage "track") -> publish queue (block)

Thread ``track`` takes the segmented frames in order, gives each to the
``TrackingLike`` (``streamseg.track.stage.TrackingStage``: track ids, alert
events; it knows no queue or thread), hands the frames of watched cameras with
their pixels to the console's live view (``streamseg.console.live.LiveView``), passes the events to
``on_events`` (clips around alerts) and queues ``(result, events)`` for
publishing. A frame the tracker fails goes on untracked, the error logged
and counted; the stage goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamseg.runtime.protocols import TrackingLike
from streamseg.runtime.queues import StageQueue
from streamseg.runtime.stage_context import StageContext
from streamseg.types import Event, Frame, FrameResult

if TYPE_CHECKING:
    from streamseg.console.live import LiveView

__all__ = ["TrackItem", "TrackStage"]

TrackItem = tuple[FrameResult, list[Event]]


class TrackStage:
    """Segmented frames from ``results``, tracked, onto ``to_publish``.

    Args:
        tracker: the tracking and alerts stage (``PassThrough`` when both are off).
        results / to_publish: where frames come from and go.
        context: the pipeline's stats, metrics, tracer and failure reports
            (``on_error``: an error survived; ``on_fail``: stop the pipeline).
        take: frames taken from ``results`` at a time, at most.
        tap: the console's live view, or ``None``.
        on_events: called with each frame's alert events (clips around alerts).
    """

    def __init__(
        self,
        *,
        tracker: TrackingLike,
        results: StageQueue[FrameResult],
        to_publish: StageQueue[list[TrackItem]],
        context: StageContext,
        take: int,
        tap: LiveView | None,
        on_events: Callable[[list[Event]], None] | None,
    ) -> None:
        self.tracker, self.results, self.to_publish = tracker, results, to_publish
        self.stats, self.metrics, self.tracer = context.stats, context.metrics, context.tracer
        self.take, self.tap, self.on_events = take, tap, on_events
        self.on_error, self.on_fail = context.on_error, context.on_fail
        self._tapped: dict[tuple[str, int], Any] = {}  # (camera, seq) -> pixels, segment -> track
        self._frame_sizes: dict[str, tuple[int, int]] = {}  # camera -> (H, W) of its last frame

    def keep_pixels(self, frame: Frame) -> None:
        """Keep a segmented frame's pixels for the live view, if it watches the camera
        (called by the segment stage)."""
        if self.tap is not None and self.tap.wants(frame.camera_id):
            self._tapped[(frame.camera_id, frame.seq)] = frame.image

    def frame_size(self, camera_id: str) -> tuple[int, int] | None:
        """``(H, W)`` of the camera's last tracked frame, ``None`` before its first."""
        return self._frame_sizes.get(camera_id)

    def forget_camera(self, camera_id: str) -> None:
        self._frame_sizes.pop(camera_id, None)

    def run(self) -> None:
        """Thread ``track``'s loop, until ``results`` ends."""
        try:
            end = False
            while not end:
                results, end = self.results.get_many(self.take, None)
                if results:
                    self.to_publish.put(self._track(results))
        except BaseException as exc:
            self.on_fail("track", exc)
        finally:
            self.to_publish.close()

    def _track(self, results: Sequence[FrameResult]) -> list[TrackItem]:
        t0, cpu0 = time.monotonic(), time.thread_time()
        rules0 = self.tracker.rules_seconds
        out: list[TrackItem] = []
        with self.tracer.stage("track", [r.frame for r in results]):
            for r in results:
                out.append(self._one(r))
        if self.metrics is not None:
            self.metrics.stage_latency.record(time.monotonic() - t0, {"stage": "track"})
        rules = self.tracker.rules_seconds - rules0
        self.stats.add_cpu("rules", rules)
        self.stats.add_cpu("track", time.thread_time() - cpu0 - rules)
        return out

    def _one(self, r: FrameResult) -> TrackItem:
        camera = r.frame.camera_id
        self._frame_sizes[camera] = r.instances.image_size
        try:
            tracked, events = self.tracker.process(r)
        except Exception as exc:
            self.on_error("track", exc, camera)
            tracked, events = r, []
        # Before publishing: the console names each event's snapshot file.
        events = list(self._offer(tracked, events))
        if events and self.on_events is not None:
            try:
                self.on_events(list(events))
            except Exception as exc:
                self.on_error("track", exc, camera)
        return tracked, events

    def _offer(self, result: FrameResult, events: Sequence[Event]) -> Sequence[Event]:
        """Hand a watched camera's tracked frame, with its pixels, to the live view.

        Returns the events to publish: as the live view gives them back (with
        their snapshot paths), else unchanged.
        """
        image = self._tapped.pop((result.frame.camera_id, result.frame.seq), None)
        if image is None or self.tap is None:
            return events
        try:
            counts = self.tracker.counts(result.frame.camera_id)
            return self.tap.offer(image, result, counts, events)
        except Exception as exc:
            self.on_error("track", exc, result.frame.camera_id)
            return events
