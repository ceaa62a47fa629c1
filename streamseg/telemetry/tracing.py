"""Frame traces: one trace follows a frame from capture to its Redis message.

A root span ``frame`` starts at the frame's capture time (in the source
thread) and ends when Redis acknowledges the frame's detections message, so
its duration is the glass-to-event latency of that frame. Its context
travels in ``Frame.trace`` (W3C ``traceparent``). Each stage opens one span
per batch (``batch``, ``segment``, ``track``, ``publish``) that links to the
spans of the frames in it.

Each write of a sink is traced by OpenTelemetry's messaging semantic
conventions: a PRODUCER span ``send <destination>`` per destination (a
Redis stream, an MQTT topic) with ``messaging.system`` (``redis``,
``mqtt``), ``messaging.destination.name``, ``messaging.operation.type`` and
``messaging.operation.name`` (``send``), ``messaging.batch.message_count``
when it carries more than one message, and ``streamseg.sink`` (the sink's
name). It links to the root spans of the frames whose messages it carries;
each message's ``traceparent`` field names that root span (the message's
creation context), which is what a consumer links its own spans to
(``streamseg.client``: CONSUMER spans ``process <stream>``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from streamseg.types import Frame

__all__ = ["FrameTracer"]

_PROPAGATOR = TraceContextTextMapPropagator()


class FrameTracer:
    """Per-frame root spans and per-batch stage spans on one tracer.

    With ``enabled=False`` every method is a cheap no-op and frames carry no
    trace context.
    """

    def __init__(self, tracer: Tracer, *, enabled: bool) -> None:
        self.tracer = tracer
        self.enabled = enabled
        self._open: dict[tuple[str, int], Span] = {}
        self._lock = threading.Lock()

    def start(self, frame: Frame) -> Frame:
        """Open the frame's root span; return the frame carrying its context."""
        if not self.enabled:
            return frame
        span = self.tracer.start_span(
            "frame",
            context=trace.set_span_in_context(trace.INVALID_SPAN),  # a new trace
            start_time=int(frame.capture_time * 1e9),
            attributes={"camera": frame.camera_id, "frame.seq": frame.seq},
        )
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        with self._lock:
            self._open[(frame.camera_id, frame.seq)] = span
        return _with_trace(frame, carrier)

    def event(self, frame: Frame, name: str, **attributes: Any) -> None:
        span = self._get(frame)
        if span is not None:
            span.add_event(name, attributes=attributes)

    def end(self, frame: Frame, *, dropped: str | None = None, **attributes: Any) -> None:
        """Close the frame's root span (``dropped``: why it never reached Redis)."""
        if not self.enabled:
            return
        with self._lock:
            span = self._open.pop((frame.camera_id, frame.seq), None)
        if span is None:
            return
        span.set_attributes(attributes)
        if dropped is not None:
            span.set_attribute("frame.dropped", dropped)
            span.set_status(Status(StatusCode.ERROR, f"dropped: {dropped}"))
        span.end()

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    @contextlib.contextmanager
    def stage(
        self,
        name: str,
        frames: Sequence[Frame],
        *,
        start_time: int | None = None,
        **attributes: Any,
    ) -> Iterator[Span | None]:
        """A span for one stage working on one batch, linked to the batch's frames.

        ``start_time``: when the work began, epoch nanoseconds (default: now),
        for a stage whose work began before the span could (a batch handed to
        the model, whose span ends when its results are there).
        """
        if not self.enabled:
            yield None
            return
        links = [Link(ctx) for ctx in (_context_of(f) for f in frames) if ctx is not None]
        attrs = {"stage": name, "batch.size": len(frames), **attributes}
        with self.tracer.start_as_current_span(
            name,
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            links=links,
            attributes=attrs,
            start_time=start_time,
        ) as span:
            yield span

    @contextlib.contextmanager
    def send(
        self, *, system: str, destination: str, sink: str, frames: Sequence[Frame], count: int
    ) -> Iterator[Span | None]:
        """The PRODUCER span of one write of ``count`` messages to ``destination``."""
        if not self.enabled:
            yield None
            return
        links = [Link(ctx) for ctx in (_context_of(f) for f in frames) if ctx is not None]
        attrs: dict[str, Any] = {
            "messaging.system": system,
            "messaging.destination.name": destination,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "streamseg.sink": sink,
        }
        if count > 1:
            attrs["messaging.batch.message_count"] = count
        span = self.tracer.start_span(
            f"send {destination}",
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            kind=SpanKind.PRODUCER,
            links=links,
            attributes=attrs,
        )
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)  # never the message
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            span.end()

    def _get(self, frame: Frame) -> Span | None:
        if not self.enabled:
            return None
        with self._lock:
            return self._open.get((frame.camera_id, frame.seq))


def _context_of(frame: Frame) -> trace.SpanContext | None:
    if not frame.trace:
        return None
    ctx = _PROPAGATOR.extract(dict(frame.trace))
    span_ctx = trace.get_current_span(ctx).get_span_context()
    return span_ctx if span_ctx.is_valid else None


def _with_trace(frame: Frame, carrier: dict[str, str]) -> Frame:
    import dataclasses

    return dataclasses.replace(frame, trace={**frame.trace, **carrier})
