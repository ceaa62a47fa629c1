"""What the sinks report, turned into the runtime's counters, metrics and frame traces.

Every message goes to every sink, and each sink reports each message once:
delivered or dropped. A frame's detections message is done when every
sink has reported it: then the frame counts as published (capture to the
last sink's acknowledgement is its latency) or, when any sink gave it up,
as lost with that sink's name as the reason (the words of
:mod:`streamseg.telemetry.counters`). Per-sink figures (messages,
drops, errors, reconnects) carry the attribute ``sink``.

Two latencies, each with one meaning: the processing latency of a frame
(capture to publish: the message handed to the sinks) and the delivery
delay of each message at each sink (publish to that sink's
acknowledgement). A sink that is away raises the second, never the first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from streamseg.publish.sink import Message
from streamseg.runtime.stats import PipelineStats
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.tracing import FrameTracer

__all__ = ["Delivery"]


class Delivery:
    """A ``SinkListener`` for all the pipeline's sinks (called from their threads).

    Args:
        sinks: how many sinks each message goes to.
        stats / metrics / tracer: where the outcome of each frame is recorded.
    """

    def __init__(
        self,
        *,
        sinks: int,
        stats: PipelineStats,
        metrics: PipelineMetrics | None,
        tracer: FrameTracer,
    ) -> None:
        self._sinks = sinks
        self.stats, self.metrics, self.tracer = stats, metrics, tracer
        self._lock = threading.Lock()
        # id(message) -> [sinks still to report, name of the first sink that dropped it]
        self._open: dict[int, list[int | str | None]] = {}

    def published(self, sink: str, messages: Sequence[Message]) -> None:
        if self.metrics is not None:
            for m in messages:
                self.metrics.messages.add(1, {"sink": sink, "type": m.kind})
        now = time.time()
        for m in messages:
            if m.published_time > 0:
                self.stats.delivered(sink, max(0.0, now - m.published_time))
        self._settle(messages, None)

    def dropped(self, sink: str, messages: Sequence[Message]) -> None:
        if self.metrics is not None:
            self.metrics.messages_lost.add(len(messages), {"sink": sink})
        self._settle(messages, sink)

    def error(self, sink: str, op: str, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.sink_errors.add(1, {"sink": sink, "op": op, "error": kind})

    def reconnect(self, sink: str, ok: bool) -> None:
        if self.metrics is not None:
            self.metrics.sink_reconnects.add(1, {"sink": sink, "outcome": "ok" if ok else "failed"})

    def _settle(self, messages: Sequence[Message], dropped_by: str | None) -> None:
        now = time.time()
        for m in messages:
            if m.frame is None:
                continue
            done, why = self._report(m, dropped_by)
            if not done:
                continue
            camera = m.frame.camera_id
            if why is None:
                latency = max(0.0, now - m.frame.capture_time)
                processing = None
                if m.published_time > 0:
                    processing = max(0.0, m.published_time - m.frame.capture_time)
                self.stats.published(camera, latency, processing)
                self.tracer.end(m.frame, latency_s=latency)
            else:
                self.stats.lost(camera, why)
                self.tracer.end(m.frame, dropped=why)

    def _report(self, m: Message, dropped_by: str | None) -> tuple[bool, str | None]:
        """One sink is done with ``m``: ``(every sink is done, why it was dropped)``."""
        if self._sinks == 1:
            return True, dropped_by
        key = id(m)
        with self._lock:
            state = self._open.setdefault(key, [self._sinks, None])
            left = int(state[0] or 0) - 1
            why = state[1] if state[1] is not None else dropped_by
            if left > 0:
                state[0], state[1] = left, why
                return False, None
            del self._open[key]
        return True, None if why is None else str(why)
