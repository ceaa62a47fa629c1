"""What the MQTT sink keeps retained for Frigate-style users, against a real mosquitto:
the availability topic with its last will, each camera's state, alert snapshots."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from streamseg.publish.mqtt import MQTTSink
from streamseg.publish.sink import Message
from tests.publish.test_mqtt_sink import mqtt_sink
from tests.publish.test_redis_sink import wait_until
from tests.support.servers import MosquittoServer, MQTTSubscriber, cli_env


def retained(server: MosquittoServer, topic: str = "#", wait: float = 1.0) -> dict[str, bytes]:
    """What a new subscriber gets at once: the retained message of each topic."""
    sub = MQTTSubscriber(server, topic, persistent=False)
    time.sleep(wait)
    sub.close()
    return {t: p for t, p, _q, r in sub.messages if r}


def detections(camera: str, *instances: tuple[str, int | None]) -> Message:
    body = {
        "type": "detections",
        "camera": camera,
        "instances": [{"label_name": n, "label": 1, "track_id": t} for n, t in instances],
    }
    return Message("detections", camera, json.dumps(body).encode(), published_time=time.time())


def test_availability_online_offline_and_the_last_will(
    mosquitto: MosquittoServer, tmp_path: Path
) -> None:
    sink = mqtt_sink(mosquitto.url, topic_prefix="site")
    sink.start()
    wait_until(lambda: sink.connected, "the sink connected")
    assert retained(mosquitto, "site/available") == {"site/available": b"online"}
    sink.close()  # a clean stop says offline itself
    assert retained(mosquitto, "site/available") == {"site/available": b"offline"}

    # A process that dies without closing: the broker publishes the last will.
    script = textwrap.dedent(f"""
        import time
        from streamseg.publish.sink_config import MQTTSinkConfig
        from streamseg.publish.mqtt import build_sink
        sink = build_sink(MQTTSinkConfig(type="mqtt", name="m", url="{mosquitto.url}",
                                         topic_prefix="site", keepalive=5))
        sink.start()
        while not sink.connected:
            time.sleep(0.05)
        print("up", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=cli_env()
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        assert retained(mosquitto, "site/available") == {"site/available": b"online"}
        os.kill(proc.pid, signal.SIGKILL)  # no DISCONNECT: the socket just closes
        proc.wait(10)
    finally:
        proc.kill()
    deadline = time.monotonic() + 10
    while retained(mosquitto, "site/available", 0.3) != {"site/available": b"offline"}:
        assert time.monotonic() < deadline, "the broker did not publish the last will"


def test_camera_state_is_retained_changes_and_is_cleared(mosquitto: MosquittoServer) -> None:
    health: dict[str, dict[str, Any]] = {
        "gate": {"state": "streaming", "since": 1.0, "reconnects": 0, "stalls": 0,
                 "last_error": None, "frames": 10, "last_frame_time": 5.0},
        "dock": {"state": "connecting", "since": 2.0, "reconnects": 0, "stalls": 0,
                 "last_error": None},
    }  # fmt: skip
    sink = mqtt_sink(mosquitto.url, state_interval=0.1)
    sink.attach_health(lambda: {k: dict(v) for k, v in health.items()}, count_untracked=False)
    sink.start()
    sink.submit([detections("gate", ("person", 1), ("person", 2), ("car", 3), ("car", None))])
    assert sink.flush(10)

    def state(camera: str) -> dict[str, Any] | None:
        payload = retained(mosquitto, f"streamseg/{camera}/state", 0.3).get(
            f"streamseg/{camera}/state"
        )
        return json.loads(payload) if payload else None

    wait_until(lambda: (state("gate") or {}).get("objects") == {"car": 1, "person": 2}, "state")
    gate = state("gate")
    assert gate is not None and gate["camera"] == "gate"
    # Objects by class of tracked instances (the untracked car is left out); the health
    # as /readyz has it, without what changes every frame.
    assert gate["health"] == {"state": "streaming", "since": 1.0, "reconnects": 0,
                              "stalls": 0, "last_error": None}  # fmt: skip
    assert (state("dock") or {}).get("objects") == {}  # served, nothing seen yet
    health["gate"].update(state="stalled", stalls=1)
    wait_until(lambda: (state("gate") or {})["health"]["state"] == "stalled", "a new state")
    # A camera no longer served: its retained state is deleted.
    del health["dock"]
    wait_until(lambda: state("dock") is None, "dock's state cleared")
    assert state("gate") is not None
    sink.close()


def test_alert_snapshots_fit_their_cap_and_are_off_by_default(mosquitto: MosquittoServer) -> None:
    import numpy as np
    from PIL import Image

    noise = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, format="JPEG", quality=95)
    big = buf.getvalue()
    assert len(big) > 64 * 1024
    off = mqtt_sink(mosquitto.url)
    assert not off.accepts("snapshot") and off.accepts("alert")
    sink = mqtt_sink(mosquitto.url, snapshots={"enabled": True, "max_kb": 32})
    assert isinstance(sink, MQTTSink) and sink.accepts("snapshot")
    sink.start()
    sink.submit([Message("snapshot", "gate", big)])
    assert sink.flush(10)
    got = retained(mosquitto, "streamseg/gate/snapshot")["streamseg/gate/snapshot"]
    assert len(got) <= 32 * 1024 and got[:2] == b"\xff\xd8"
    assert Image.open(io.BytesIO(got)).size < (640, 480)  # scaled down to fit
    sink.close()
