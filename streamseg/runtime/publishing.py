"""The pipeline's publish stage: each message encoded once, handed to every sink.

::

    publish queue -> MessageEncoder.encode (stage "publish") -> Sink.submit, every sink
    one thread per sink (streamseg.publish.sink): its outage buffer, writes, reconnects

Thread ``publish`` ends when the publish queue does: it flushes every sink
(they flush at once, each in its own thread) within the drain time left
after ``stop()``, then closes them; what a sink still holds then is counted
as dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from streamseg.publish.buffered import BufferedSink
from streamseg.publish.encode import MessageEncoder
from streamseg.publish.sink import Sink
from streamseg.runtime.queues import StageQueue
from streamseg.runtime.stage_context import StageContext
from streamseg.runtime.tracking import TrackItem

__all__ = ["PublishStage"]

log = logging.getLogger("streamseg.runtime")


class PublishStage:
    """Tracked frames and their events from ``to_publish``, to every sink.

    Args:
        encoder: turns results and events into messages (JSON, once).
        sinks: where every message goes.
        to_publish: where the tracked frames come from.
        context: the pipeline's stats, metrics, tracer and failure reports
            (``on_error``: an error survived; ``on_fail``: stop the pipeline).
        drain_timeout: seconds from ``stopped_at`` allowed to flush the sinks.

    ``stopped_at`` (``time.monotonic()``) is set by the pipeline's ``stop()``;
    ``done`` is set once every sink is flushed and closed.
    """

    def __init__(
        self,
        *,
        encoder: MessageEncoder,
        sinks: Sequence[Sink],
        to_publish: StageQueue[list[TrackItem]],
        context: StageContext,
        drain_timeout: float,
    ) -> None:
        self.encoder, self.sinks, self.to_publish = encoder, list(sinks), to_publish
        self.stats, self.metrics, self.tracer = context.stats, context.metrics, context.tracer
        self.drain_timeout = drain_timeout
        self.on_error, self.on_fail = context.on_error, context.on_fail
        self.stopped_at: float | None = None
        self.done = threading.Event()

    def run(self) -> None:
        """Thread ``publish``'s loop, until ``to_publish`` ends; then flush and close."""
        try:
            end = False
            while not end:
                groups, end = self.to_publish.get_many(64, 0.5)
                items = [item for g in groups for item in g]
                if items:
                    self._publish(items)
            deadline = (self.stopped_at or time.monotonic()) + self.drain_timeout
            for sink in self.sinks:  # they flush at once, each in its own thread
                sink.flush(max(1.0, deadline - time.monotonic()))
        except BaseException as exc:
            self.on_fail("publish", exc)
        finally:
            self._close_sinks()
            self.done.set()

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
        if self.metrics is not None:
            self.metrics.stage_latency.record(time.monotonic() - t0, {"stage": "publish"})

    def writer_cpu_seconds(self) -> float:
        """CPU seconds of the sinks' writer threads (each ``BufferedSink`` counts its own)."""
        return sum(s.cpu_seconds for s in self.sinks if isinstance(s, BufferedSink))

    def _close_sinks(self) -> None:
        for sink in self.sinks:
            try:
                lost = sink.close()  # what is left is counted as dropped (reason: the sink)
            except Exception as exc:
                self.on_error("publish", exc, None)
                continue
            if lost:
                log.warning("publish: %d messages could not reach sink %s; lost", lost, sink.name)
