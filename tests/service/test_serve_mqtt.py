"""``serve`` publishing to Redis and to an MQTT broker at once, through a broker restart
and a restart of ``serve`` itself.

The broker is a real mosquitto with a password (given to serve as
``${MQTT_PASSWORD}``); the test's subscriber keeps a persistent session, so
the broker queues for it whatever serve publishes while it reconnects.
Every frame serve counts as published must be on both, with the same JSON.
The outage shows as delivery delay, not as processing latency. After a
restart of ``serve``, a new subscriber finds the retained availability
(``online``) and the camera's state, as Frigate users expect.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ServeProcess, metric, service_pipeline, summary
from tests.support.servers import MosquittoServer, MQTTSubscriber, RedisServer

pytestmark = pytest.mark.slow

CAMERAS = [{"id": "cam", "url": "synthetic://?seed=5&width=160&height=120&fps=10&objects=3"}]
STREAM = "streamseg:detections:cam"
PREFIX = "home/streamseg"
TOPIC = f"{PREFIX}/cam/detections"
PASSWORD = "mqtt-pw-6f1d"
OUTAGE_S = 2.0


def test_redis_and_mqtt_at_once_through_a_broker_restart(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    broker = MosquittoServer(tmp_path / "mosquitto", users={"streamseg": PASSWORD})
    broker.start()
    sub = MQTTSubscriber(broker, "home/#", username="streamseg", password=PASSWORD)
    try:
        sinks = [
            {
                "type": "mqtt",
                "name": "ha",
                "url": broker.url,
                "username": "streamseg",
                "password": "${MQTT_PASSWORD}",
                "topic_prefix": "home/streamseg",
                "reconnect_initial": 0.1,
                "reconnect_max": 0.5,
            }
        ]
        config = service_pipeline(CAMERAS, {"url": redis_server.url}, sinks=sinks)
        proc = serve(config, env={"MQTT_PASSWORD": PASSWORD})
        sub.wait_for(5, TOPIC, timeout=90)
        ready = proc.readyz()
        assert ready["sinks"]["ha"]["type"] == "mqtt" and ready["sinks"]["ha"]["connected"]

        def streaming() -> bool:
            states = [json.loads(p) for p in sub.received(f"{PREFIX}/cam/state") if p]
            return any(s["health"]["state"] == "streaming" for s in states)

        proc.wait_for(streaming, 30, "a retained state of the streaming camera")
        broker.stop()
        proc.wait_for(lambda: proc.readyz()["sinks"]["ha"]["buffered"] > 0, 20, "buffering")
        time.sleep(OUTAGE_S)
        broker.start()
        proc.wait_for(lambda: proc.readyz().get("ready"), 30, "ready again")
        client = redis_server.client()
        proc.wait_for(lambda: client.xlen(STREAM) >= 30, 60, "more frames after the restart")
        code, text = proc.get("/metrics")
        assert code == 200
        assert metric(text, "streamseg_publish_reconnects_total", sink="ha", outcome="ok") == 1
        # The outage is delivery delay at the sink that was away, not processing latency.
        latency: dict[str, Any] = proc.readyz()["latency"]
        assert latency["delivery_ms"]["sinks"]["ha"]["p99"] >= 1000 * OUTAGE_S, latency
        assert latency["delivery_ms"]["sinks"]["redis"]["p99"] < 1000 * OUTAGE_S, latency
        assert latency["processing_ms"]["p99"] < 1000 * OUTAGE_S, latency
        assert proc.terminate() == 0, proc.tail()
        assert retained(broker, f"{PREFIX}/available") == b"offline"  # a clean stop says so
        published = summary(proc.log, "cam")["published"]
        sub.wait_for(published, TOPIC, timeout=20)  # the broker's queue for our session
        on_redis = [f[b"data"] for _id, f in client.xrange(STREAM)]
        on_mqtt = sub.received(TOPIC)
        _restart_and_read_retained(serve, config, broker)
    finally:
        sub.close()
        broker.stop()
    assert published > 20 and len(on_redis) == published
    # Every frame on MQTT too, as the same bytes (at least once), in order of first arrival.
    firsts = list(dict.fromkeys(on_mqtt))
    assert firsts == on_redis
    assert json.loads(on_mqtt[0])["camera"] == "cam"
    assert "ha: unavailable" in proc.log and "ha: reconnected" in proc.log
    assert PASSWORD not in proc.log


def _restart_and_read_retained(
    serve: Callable[..., ServeProcess], config: dict[str, Any], broker: MosquittoServer
) -> None:
    """serve again: a new subscriber gets availability online and the camera's state."""
    proc = serve(config, env={"MQTT_PASSWORD": PASSWORD})
    proc.wait_for(lambda: retained(broker, f"{PREFIX}/available") == b"online", 90, "online")

    def streaming_state() -> bytes | None:  # the camera's retained state once it streams
        state = retained(broker, f"{PREFIX}/cam/state")
        return state if state and json.loads(state)["health"]["state"] == "streaming" else None

    state = proc.wait_for(streaming_state, 30, "the state of the streaming camera")
    body = json.loads(state)
    assert set(body) == {"camera", "time", "objects", "health"} and body["camera"] == "cam"
    assert body["health"]["state"] == "streaming" and isinstance(body["objects"], dict)
    assert proc.terminate() == 0, proc.tail()


def retained(broker: MosquittoServer, topic: str) -> bytes | None:
    """The retained message of ``topic`` as a new subscriber gets it (``None``: none)."""
    sub = MQTTSubscriber(broker, topic, persistent=False, username="streamseg", password=PASSWORD)
    deadline = time.monotonic() + 1.0
    while not sub.messages and time.monotonic() < deadline:
        time.sleep(0.02)
    sub.close()
    got = [p for t, p, _q, r in sub.messages if r and t == topic]
    return got[0] if got else None
