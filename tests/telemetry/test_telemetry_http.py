"""/healthz, /readyz and /metrics over real HTTP; Prometheus exposition of runtime metrics."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import torch

from streamseg.runtime.stats import PipelineStats
from streamseg.telemetry.http import HealthServer
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.setup import Telemetry
from streamseg.telemetry.tracing import FrameTracer
from streamseg.types import Frame


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_health_and_ready() -> None:
    state: dict[str, Any] = {"ready": False}

    def readiness() -> tuple[bool, dict[str, Any]]:
        return state["ready"], {"cameras": {"a": {"state": "connecting"}}}

    server = HealthServer(host="127.0.0.1", port=0, readiness=readiness, metrics=None).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert get(base + "/healthz")[0] == 200
        code, body = get(base + "/readyz")
        assert code == 503
        assert json.loads(body) == {"ready": False, "cameras": {"a": {"state": "connecting"}}}
        state["ready"] = True
        code, body = get(base + "/readyz")
        assert code == 200 and json.loads(body)["ready"] is True
        assert get(base + "/metrics")[0] == 404
        assert get(base + "/nope")[0] == 404
    finally:
        server.close()


def test_prometheus_metrics_scraped() -> None:
    tel = Telemetry(metrics="prometheus", install_globals=False)
    metrics = PipelineMetrics(tel.meter)
    stats = PipelineStats(["cam1"], metrics)
    metrics.observe(
        queue_depths=lambda: {"camera:cam1": 3, "results": 1},
        camera_health=lambda: {"cam1": ("stalled", 2, 1)},
        sink_state=lambda: {"redis": (True, 0), "central": (False, 7)},
        ops_on_reference=lambda: {"nms": "OutOfResources: shared memory"},
    )
    for _ in range(5):
        stats.read("cam1")
    stats.skipped("cam1", "queue_full", 2)
    stats.published("cam1", 0.12)
    metrics.stage_latency.record(0.05, {"stage": "segment"})
    server = HealthServer(
        host="127.0.0.1", port=0, readiness=lambda: (True, {}), metrics=tel.metrics_text
    ).start()
    try:
        code, body = get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.close()
        tel.shutdown()
    text = body.decode()
    assert code == 200
    assert sample(text, "streamseg_frames_read_total", camera="cam1") == 5
    assert sample(text, "streamseg_frames_skipped_total", camera="cam1", reason="queue_full") == 2
    assert sample(text, "streamseg_runtime_queue_depth", queue="camera:cam1") == 3
    assert sample(text, "streamseg_ingest_health", camera="cam1", state="stalled") == 1
    assert sample(text, "streamseg_ingest_health", camera="cam1", state="streaming") == 0
    assert sample(text, "streamseg_ingest_reconnects_total", camera="cam1") == 2
    assert sample(text, "streamseg_ingest_stalls_total", camera="cam1") == 1
    assert sample(text, "streamseg_pipeline_latency_seconds_count", camera="cam1") == 1
    assert sample(text, "streamseg_pipeline_latency_seconds_bucket", camera="cam1", le="0.1") == 0
    assert sample(text, "streamseg_pipeline_latency_seconds_bucket", camera="cam1", le="0.15") == 1
    assert sample(text, "streamseg_stage_duration_seconds_count", stage="segment") == 1
    assert sample(text, "streamseg_publish_connected", sink="redis") == 1
    assert sample(text, "streamseg_publish_connected", sink="central") == 0
    assert sample(text, "streamseg_messages_buffered", sink="central") == 7
    assert sample(text, "streamseg_segment_ops_on_reference", op="nms") == 1
    assert sample(text, "streamseg_segment_ops_on_reference", op="roi_align") is None


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` whose labels include ``labels``."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def test_frame_trace_from_capture_to_publish() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tel = Telemetry(traces="none", install_globals=False)
    exporter = InMemorySpanExporter()
    tel.tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = FrameTracer(tel.tracer, enabled=True)
    captured = time.time() - 0.25
    frames = [
        tracer.start(Frame("a", i, None, captured, torch.zeros((2, 2, 3), dtype=torch.uint8)))
        for i in range(2)
    ]
    assert all("traceparent" in f.trace for f in frames)
    with tracer.stage("segment", frames):
        pass
    for f in frames:
        tracer.end(f.without_image(), latency_s=0.25)
    spans = {(s.name, s.attributes.get("frame.seq")): s for s in exporter.get_finished_spans()}
    seg = spans[("segment", None)]
    root = spans[("frame", 0)]
    assert {link.context.span_id for link in seg.links} == {
        spans[("frame", 0)].context.span_id,
        spans[("frame", 1)].context.span_id,
    }
    assert root.parent is None
    assert root.end_time - root.start_time >= 0.2e9  # starts at capture time
    assert root.attributes["latency_s"] == 0.25
    assert tracer.open_count() == 0
    tel.shutdown()
