"""Two latencies, one meaning each: processing (capture to publish) and delivery
(publish to a sink's acknowledgement), through a real Redis sink and an outage.

A sink that is away must raise the delivery delay only: the frames were
processed in good time, and the status line, ``/readyz``'s figures and the
metrics say so separately.
"""

from __future__ import annotations

import json
import time

import torch
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import build_sink
from streamseg.publish.sink import Message
from streamseg.runtime.delivery import Delivery
from streamseg.runtime.stats import PipelineStats
from streamseg.runtime.status import format_status
from streamseg.telemetry.metrics import PipelineMetrics
from streamseg.telemetry.tracing import FrameTracer
from streamseg.types import Frame
from tests.support.servers import RedisServer

OUTAGE_S = 1.5
PROCESSING_S = 0.05


def _messages(n: int) -> list[Message]:
    """``n`` detections messages of frames captured ``PROCESSING_S`` before publishing."""
    now = time.time()
    out = []
    for i in range(n):
        frame = Frame("cam", i, None, now - PROCESSING_S, torch.zeros((2, 2, 3), dtype=torch.uint8))
        data = json.dumps({"seq": i}).encode()
        out.append(Message("detections", "cam", data, frame.without_image(), now))
    return out


def test_an_outage_raises_the_delivery_delay_not_the_processing_latency(
    redis_server: RedisServer,
) -> None:
    from opentelemetry.trace import NoOpTracer

    reader = InMemoryMetricReader()
    metrics = PipelineMetrics(MeterProvider(metric_readers=[reader]).get_meter("t"))
    stats = PipelineStats(["cam"], metrics)
    delivery = Delivery(
        sinks=1, stats=stats, metrics=metrics, tracer=FrameTracer(NoOpTracer(), enabled=False)
    )
    cfg = RedisConfig(url=redis_server.url, reconnect_initial=0.05, reconnect_max=0.2)
    sink = build_sink(cfg, name="redis")
    sink.start(delivery)
    try:
        sink.submit(_messages(5))  # Redis answers: both figures small
        assert sink.flush(10)
        before = stats.delivery_percentiles(99)[0]
        assert before is not None and before < OUTAGE_S / 2
        redis_server.stop()
        sink.submit(_messages(5))  # buffered while Redis is away
        time.sleep(OUTAGE_S)
        redis_server.start()
        assert sink.flush(20)
    finally:
        sink.close()
    (p50, p99) = stats.processing_percentiles(50, 99)
    (d50, d99) = stats.delivery_percentiles(50, 99)
    assert p50 is not None and p99 is not None and d50 is not None and d99 is not None
    assert abs(p99 - PROCESSING_S) < 0.02 and abs(p50 - PROCESSING_S) < 0.02
    assert d99 >= OUTAGE_S  # the buffered messages waited out the outage
    # /readyz's figures: the same two, overall and per sink, in ms.
    details = stats.latency_details()
    assert details["processing_ms"]["p99"] < 1000 * (PROCESSING_S + 0.02)
    assert details["delivery_ms"]["p99"] >= 1000 * OUTAGE_S
    assert details["delivery_ms"]["sinks"]["redis"] == {
        k: v for k, v in details["delivery_ms"].items() if k != "sinks"
    }
    # The status line: two separate figures.
    line = format_status(
        {"cam": 1.0}, stats.snapshot(), {"cam": "streaming"},
        stats.processing_percentiles(50, 99), stats.delivery_percentiles(50, 99),
        {"redis": (True, 0)},
    )  # fmt: skip
    parts = line.split(" | ")
    assert parts[1] == f"processing p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms", line
    assert parts[2] == f"delivery p50 {d50 * 1000:.0f} ms p99 {d99 * 1000:.0f} ms", line
    # The metrics: one histogram each, the delay per sink.
    names = {
        m.name: m
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    processing = names["streamseg.pipeline.processing_latency"].data.data_points[0]
    delay = names["streamseg.publish.delivery_delay"].data.data_points[0]
    assert processing.count == 10 and processing.max < PROCESSING_S + 0.02
    assert delay.count == 10 and delay.max >= OUTAGE_S and delay.attributes == {"sink": "redis"}


def test_status_line_before_anything_was_measured() -> None:
    stats = PipelineStats(["a"])
    line = format_status({}, {}, {}, stats.processing_percentiles(50, 99),
                         stats.delivery_percentiles(50, 99), {"redis": (False, 3)})  # fmt: skip
    assert line == "processing - | delivery - | redis DOWN (3 buffered)"
    assert stats.latency_details() == {
        "processing_ms": {"p50": None, "p99": None},
        "delivery_ms": {"p50": None, "p99": None, "sinks": {}},
    }
