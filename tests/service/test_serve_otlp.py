"""``serve`` exports traces and metrics over OTLP/HTTP, and a frame's trace reaches Redis.

An OTLP/HTTP receiver on loopback (a real HTTP server that decodes the
protobuf requests with opentelemetry-proto, as a collector would) takes what
the service pushes. The detections message of a frame names its trace
(``traceparent``); that trace's root span runs from capture to publish, and
the per-batch stage spans link to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.serve import ServeProcess, detections, service_pipeline
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow


class Receiver:
    """Keeps every span and metric name POSTed to ``/v1/traces`` and ``/v1/metrics``."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.metric_names: set[str] = set()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.take(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, path: str, body: bytes) -> None:
        with self.lock:
            if path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        self.spans.extend(ss.spans)
            elif path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                for rm in request.resource_metrics:
                    for sm in rm.scope_metrics:
                        self.metric_names.update(m.name for m in sm.metrics)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def test_traces_and_metrics_reach_an_otlp_receiver(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, receiver: Receiver
) -> None:
    cams = [{"id": "synth", "url": "synthetic://?seed=4&width=160&height=120&fps=10"}]
    telemetry = {
        "traces": "otlp",
        "metrics": "otlp",
        "otlp_endpoint": receiver.url,
        "export_interval": 1,
    }
    proc = serve(service_pipeline(cams, {"url": redis_server.url}, telemetry=telemetry))
    client = redis_server.client()
    proc.wait_for(lambda: client.xlen("streamseg:detections:synth") >= 5, 90, "publishing")
    proc.wait_for(lambda: "streamseg.frames.segmented" in receiver.metric_names, 30, "metrics")
    assert proc.terminate() == 0, proc.tail()  # flushes the span exporter

    names = receiver.metric_names
    assert {"streamseg.frames.read", "streamseg.pipeline.latency"} <= names
    assert "streamseg.messages.published" in names
    message = detections(client, "synth")[2]
    _version, trace_id, _span, _flags = message["traceparent"].split("-")
    with receiver.lock:
        spans = list(receiver.spans)
    roots = [s for s in spans if s.name == "frame" and s.trace_id.hex() == trace_id]
    assert len(roots) == 1, "the published frame's root span was not exported"
    root = roots[0]
    assert root.end_time_unix_nano > root.start_time_unix_nano
    linked = {s.name for s in spans for link in s.links if link.span_id == root.span_id}
    assert {"segment", "track", "publish"} <= linked, linked
    # The write that carried the message: a PRODUCER span by the messaging conventions.
    sends = [s for s in spans for link in s.links if link.span_id == root.span_id]
    sends = [s for s in sends if s.name == "send streamseg:detections:synth"]
    assert len(sends) >= 1, linked
    attrs = {a.key: a.value for a in sends[0].attributes}
    assert sends[0].kind == 4  # SPAN_KIND_PRODUCER in OTLP
    assert attrs["messaging.system"].string_value == "redis"
    assert attrs["messaging.destination.name"].string_value == "streamseg:detections:synth"
    assert attrs["messaging.operation.type"].string_value == "send"
    count = attrs.get("messaging.batch.message_count")
    assert count is None or count.int_value >= 2
