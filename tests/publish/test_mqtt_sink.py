"""The MQTT sink against a real mosquitto: topics, the same bytes as Redis, a broker
restart at QoS 1, credentials and TLS, and the PRODUCER spans of its writes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import ValidationError

from streamseg.publish.mqtt import MQTTSink
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.sink import Message
from streamseg.publish.sink_config import MQTTSinkConfig
from streamseg.publish.sinks import build_sink
from streamseg.telemetry.tracing import FrameTracer
from tests.publish.test_redis_sink import Listener, Recorder, wait_until
from tests.support.servers import MosquittoServer, MQTTSubscriber, RedisServer, make_tls_files


def mqtt_sink(url: str, **fields: Any) -> MQTTSink:
    fields.setdefault("reconnect_initial", 0.05)
    fields.setdefault("reconnect_max", 0.3)
    cfg = MQTTSinkConfig(type="mqtt", name="mqtt", url=url, **fields)
    sink = build_sink("mqtt", cfg, name="mqtt")
    assert isinstance(sink, MQTTSink)
    return sink


def message(i: int, camera: str = "a", kind: str = "detections") -> Message:
    data = json.dumps({"type": kind, "camera": camera, "i": i}, separators=(",", ":")).encode()
    return Message(kind=kind, camera=camera, data=data)


def batch() -> list[Message]:
    return [message(i, cam) for i in range(20) for cam in ("a", "b")] + [
        message(i, "b", "alert") for i in range(5)
    ]


def test_topics_and_the_same_bytes_as_redis(
    mosquitto: MosquittoServer, redis_server: RedisServer
) -> None:
    sub = MQTTSubscriber(mosquitto, "streamseg/#")
    redis = build_sink("redis", RedisConfig(url=redis_server.url), name="redis")
    mqtt = mqtt_sink(mosquitto.url)
    rec = Recorder()
    for sink in (redis, mqtt):
        sink.start(Listener(rec))
        sink.submit(batch())
    assert redis.flush(10) and mqtt.flush(10)
    for topic, n in (("streamseg/a/detections", 20), ("streamseg/b/detections", 20)):
        sub.wait_for(n, topic)
    sub.wait_for(5, "streamseg/alerts")
    client = redis_server.client()
    for cam in ("a", "b"):
        stored = [f[b"data"] for _id, f in client.xrange(f"streamseg:detections:{cam}")]
        assert sub.received(f"streamseg/{cam}/detections") == stored
        assert len(stored) == 20
    alerts = [f[b"data"] for _id, f in client.xrange("streamseg:alerts")]
    assert sub.received("streamseg/alerts") == alerts and len(alerts) == 5
    forwarded = [m for m in sub.messages if m[0].endswith(("/detections", "/alerts"))]
    assert {(q, r) for _t, _p, q, r in forwarded} == {(1, False)}  # QoS 1, not retained
    health = mqtt.health()
    assert (health.type, health.published, health.dropped, health.buffered) == ("mqtt", 45, 0, 0)
    assert len(rec.published) == 90 and rec.errors == []
    for sink in (redis, mqtt):
        assert sink.close() == 0
    sub.close()


def tracer() -> tuple[FrameTracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return FrameTracer(provider.get_tracer("test"), enabled=True), exporter


def _ids(sub: MQTTSubscriber) -> set[int]:
    return {json.loads(p)["i"] for p in sub.received("site/a/detections")}


def test_broker_restart_loses_nothing_at_qos1(mosquitto: MosquittoServer) -> None:
    sub = MQTTSubscriber(mosquitto, "site/#")
    sink = mqtt_sink(mosquitto.url, topic_prefix="site")
    rec = Recorder()
    frames, exporter = tracer()
    sink.start(Listener(rec), tracer=frames)
    sink.submit([message(i) for i in range(50)])
    assert sink.flush(10)
    mosquitto.stop()
    sink.submit([message(i) for i in range(50, 100)])  # the broker is away
    wait_until(lambda: not sink.connected, "the sink noticing the outage")
    wait_until(lambda: len(rec.attempts) >= 2, "reconnect attempts while away")
    assert sink.buffered == 50
    mosquitto.start()
    assert sink.flush(15), sink.health()
    # QoS 1 may deliver some twice: wait for every id, not for 100 messages
    wait_until(lambda: _ids(sub) >= set(range(100)), "every message at the subscriber", timeout=20)
    got = [json.loads(p)["i"] for p in sub.received("site/a/detections")]
    assert set(got) == set(range(100))  # every one, at least once
    assert list(dict.fromkeys(got)) == list(range(100))  # in order of first arrival
    health = sink.health()
    assert health.dropped == 0 and health.reconnects == 1 and health.connected
    assert rec.attempts[-1] is True and False in rec.attempts
    assert rec.errors and {op for op, _kind in rec.errors} <= {"publish", "connect"}
    spans = exporter.get_finished_spans()
    failed = [sp for sp in spans if sp.status.status_code is StatusCode.ERROR]
    assert failed and all((sp.attributes or {}).get("error.type") for sp in failed)
    sent = sum(
        int((sp.attributes or {}).get("messaging.batch.message_count", 1))
        for sp in spans
        if sp not in failed
    )
    assert sent == 100  # each message in exactly one successful send span
    assert sink.close() == 0
    sub.close()


def test_credentials_and_tls(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tls = make_tls_files(tmp_path / "tls")
    server = MosquittoServer(tmp_path / "m", users={"cam": "s3cr3t-pw"}, tls=tls, client_certs=True)
    server.start()
    try:
        sub = MQTTSubscriber(server, "streamseg/#", username="cam", password="s3cr3t-pw")
        tls_cfg = {"ca_file": str(tls.ca), "cert_file": str(tls.client_cert),
                   "key_file": str(tls.client_key)}  # fmt: skip
        assert server.url.startswith("mqtts://")
        sink = mqtt_sink(server.url, username="cam", password="s3cr3t-pw", tls=tls_cfg)
        sink.start()
        sink.submit([message(i) for i in range(5)])
        assert sink.flush(10)
        sub.wait_for(5, "streamseg/a/detections")
        sink.close()

        caplog.set_level(logging.DEBUG, logger="streamseg")
        wrong = mqtt_sink(server.url, username="cam", password="wrong-pw-xyz", tls=tls_cfg)
        rec = Recorder()
        wrong.start(Listener(rec))
        wrong.submit([message(99)])
        wait_until(lambda: len(rec.errors) >= 2, "refused connections")
        assert not wrong.connected and set(rec.errors) == {("connect", "ConnectionRefusedError")}
        assert wrong.close() == 1  # the message never left
        assert "wrong-pw-xyz" not in caplog.text and "s3cr3t-pw" not in caplog.text
        assert "refused" in caplog.text
        sub.close()
    finally:
        server.stop()


def test_send_spans_follow_the_messaging_conventions(mosquitto: MosquittoServer) -> None:
    frames, exporter = tracer()
    sink = mqtt_sink(mosquitto.url)
    sink.start(tracer=frames)
    sink.submit(batch())
    assert sink.flush(10)
    sink.close()
    spans = exporter.get_finished_spans()
    by_name: dict[str, int] = {}
    for span in spans:
        assert span.kind is SpanKind.PRODUCER
        attrs = span.attributes or {}
        assert attrs["messaging.system"] == "mqtt"
        assert attrs["messaging.operation.type"] == "send"
        assert span.name == f"send {attrs['messaging.destination.name']}"
        by_name[span.name] = by_name.get(span.name, 0) + int(
            attrs.get("messaging.batch.message_count", 1)
        )
    assert by_name == {
        "send streamseg/a/detections": 20,
        "send streamseg/b/detections": 20,
        "send streamseg/alerts": 5,
    }


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"url": "tcp://broker:1883"}, "mqtt:// or mqtts://"),
        ({"url": "mqtt://u:p@broker"}, "username/password"),
        ({"topic_prefix": "a/+/b"}, "topic_prefix"),
        ({"qos": 3}, "qos"),
    ],
)
def test_config_errors_say_what_to_fix(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError) as err:
        MQTTSinkConfig.model_validate({"type": "mqtt", "name": "m", **fields})
    assert words in str(err.value)


def test_tls_from_the_url_and_default_ports() -> None:
    plain = MQTTSinkConfig(type="mqtt", name="m", url="mqtt://broker")
    secure = MQTTSinkConfig(type="mqtt", name="m", url="mqtts://broker")
    assert (plain.use_tls, plain.host_port) == (False, ("broker", 1883))
    assert (secure.use_tls, secure.host_port) == (True, ("broker", 8883))
