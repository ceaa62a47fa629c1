"""Consume spans: ``process <stream>`` CONSUMER spans linked to the producer's trace."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from streamseg.client import Client
from streamseg.telemetry.tracing import FrameTracer
from tests.support.publishing import frame_item, publish
from tests.support.servers import RedisServer


def test_consume_spans_link_to_the_frame_trace(redis_server: RedisServer) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    frames = FrameTracer(provider.get_tracer("test"), enabled=True)
    result, events = frame_item("gate", 0, alert=True)
    frame = frames.start(result.frame)  # the root span; its context goes into the messages
    publish(redis_server.url, [(type(result)(frame, result.instances), events)], tracer=frames)
    frames.end(frame)

    client = Client(redis_server.url, tracer_provider=provider)
    user = provider.get_tracer("user")
    for _ in client.detections(["gate"], start="begin", group="g", consumer="c1", limit=1):
        with user.start_as_current_span("count people"):
            pass
    for _ in client.alerts(start="begin", limit=1):
        pass

    spans = {s.name: s for s in exporter.get_finished_spans()}
    root = _ids(spans["frame"].context)
    send = spans["send streamseg:detections:gate"]
    assert send.kind == SpanKind.PRODUCER
    process = spans["process streamseg:detections:gate"]
    assert process.kind == SpanKind.CONSUMER
    assert dict(process.attributes or {}) == {
        "messaging.system": "redis",
        "messaging.destination.name": "streamseg:detections:gate",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": process.attributes["messaging.message.id"],  # type: ignore[index]
        "messaging.consumer.group.name": "g",
    }
    # Producer and consumer link to the same creation context: the frame's root span.
    assert [_ids(link.context) for link in send.links] == [root]
    assert [_ids(link.context) for link in process.links] == [root]
    alert = spans["process streamseg:alerts"]
    assert [_ids(link.context) for link in alert.links] == [root]
    # What the caller does with a message is a child of its process span.
    assert spans["count people"].parent.span_id == process.context.span_id  # type: ignore[union-attr]
    assert process.end_time is not None and process.end_time >= spans["count people"].end_time


def test_no_link_without_traceparent(redis_server: RedisServer) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    publish(redis_server.url, [frame_item("gate", 0)])
    client = Client(redis_server.url, tracer_provider=provider)
    assert [f.traceparent for f in client.detections(start="begin", limit=1)] == [None]
    (span,) = exporter.get_finished_spans()
    assert span.name == "process streamseg:detections:gate" and not span.links


def _ids(ctx: Any) -> tuple[int, int]:
    return (ctx.trace_id, ctx.span_id)
