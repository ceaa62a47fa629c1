"""``serve`` publishing to Redis and to an MQTT broker at once, through a broker restart.

The broker is a real mosquitto with a password (given to serve as
``${MQTT_PASSWORD}``); the test's subscriber keeps a persistent session, so
the broker queues for it whatever serve publishes while it reconnects.
Every frame serve counts as published must be on both, with the same JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.serve import ServeProcess, metric, service_pipeline, summary
from tests.support.servers import MosquittoServer, MQTTSubscriber, RedisServer

pytestmark = pytest.mark.slow

CAMERAS = [{"id": "cam", "url": "synthetic://?seed=5&width=160&height=120&fps=10&objects=3"}]
STREAM = "streamseg:detections:cam"
TOPIC = "home/streamseg/cam/detections"
PASSWORD = "mqtt-pw-6f1d"


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

        broker.stop()
        proc.wait_for(lambda: proc.readyz()["sinks"]["ha"]["buffered"] > 0, 20, "buffering")
        broker.start()
        proc.wait_for(lambda: proc.readyz().get("ready"), 30, "ready again")
        client = redis_server.client()
        proc.wait_for(lambda: client.xlen(STREAM) >= 30, 60, "more frames after the restart")
        code, text = proc.get("/metrics")
        assert code == 200
        assert metric(text, "streamseg_publish_reconnects_total", sink="ha", outcome="ok") == 1
        assert proc.terminate() == 0, proc.tail()
        published = summary(proc.log, "cam")["published"]
        sub.wait_for(published, TOPIC, timeout=20)  # the broker's queue for our session
        on_redis = [f[b"data"] for _id, f in client.xrange(STREAM)]
        on_mqtt = sub.received(TOPIC)
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
