"""Every runtime change through the console's API is safe everywhere (a real ``serve``).

One service (cameras a and b, the console, an MQTT sink on a real mosquitto,
clips around alerts, the status line logged every half second) gets a
camera c added (a looping file, so its packets are recorded), then a zone,
a line and rules for it, then each of them removed again, then camera b
changed and c removed, then c added again and b removed (with its alerts
section). After each change the test looks at
everything that reports cameras and rules: the status line (its thread
must live on), ``/readyz``, the Prometheus gauges, the console's API and
live frames, the clip recorder, Redis and MQTT (detections, alerts, the
retained camera state).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import run_cli
from tests.support.console import TOKEN, call, console_pipeline, fields
from tests.support.serve import ServeProcess, detections, summary
from tests.support.servers import MosquittoServer, MQTTSubscriber, RedisServer, free_port

pytestmark = pytest.mark.slow

FULL = {"polygon": [[0, 0], [160, 0], [160, 120], [0, 120]]}
LINE = {"points": [[80, 0], [80, 120]]}
GAUGES = (
    "streamseg_ingest_health",
    "streamseg_track_active",
    "streamseg_track_rules_occupancy",
)


class Watch:
    """What each part of the running service says about the cameras and rules."""

    def __init__(self, proc: ServeProcess, redis: RedisServer, broker: MosquittoServer) -> None:
        self.proc, self.port, self.redis, self.broker = proc, proc.http_port, redis, broker

    def status_lines(self) -> list[str]:
        return re.findall(r"streamseg\.status: status: (.*)", self.proc.log)

    def status_after(self, t0: int) -> list[str]:
        """The cameras of the status lines logged after the ``t0``-th one (waits for two)."""
        self.proc.wait_for(lambda: len(self.status_lines()) >= t0 + 2, 20, "two new status lines")
        line = self.status_lines()[-1]
        return [p.split(" ")[0] for p in line.split(" | ") if " fps skipped " in p]

    def gauges(self, **labels: str) -> dict[str, float]:
        """``{gauge: sum of its samples}`` of the ``GAUGES`` with samples of ``labels``."""
        return self.samples(GAUGES, **labels)

    def samples(self, names: tuple[str, ...], **labels: str) -> dict[str, float]:
        from prometheus_client.parser import text_string_to_metric_families

        out: dict[str, float] = {}
        for family in text_string_to_metric_families(self.proc.get("/metrics")[1]):
            for s in family.samples:
                if s.name in names and all(s.labels.get(k) == v for k, v in labels.items()):
                    out[s.name] = out.get(s.name, 0.0) + float(s.value)
        return out

    def queue_gauge(self, camera: str) -> bool:
        return f'queue="camera:{camera}"' in self.proc.get("/metrics")[1]

    def retained_state(self, camera: str) -> dict[str, Any] | None:
        topic = f"streamseg/{camera}/state"
        sub = MQTTSubscriber(self.broker, topic, persistent=False)
        time.sleep(0.5)
        sub.close()
        got = [p for t, p, _q, r in sub.messages if r and t == topic and p]
        return json.loads(got[-1]) if got else None

    def section(self, camera: str) -> dict[str, Any]:
        return dict(call(self.port, "GET", f"/api/cameras/{camera}/alerts")[1])

    def change(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        code, reply = call(self.port, method, path, body, token=TOKEN)
        assert code == status, (method, path, code, reply)
        return reply


def _scene(tmp_path: Path) -> Path:
    out = tmp_path / "scene"
    made = run_cli("synth", "--out", str(out), "--seed", "7", "--frames", "40", "--fps", "8",
                   "--size", "120x160", "--objects", "3")  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out / "scene.mp4"


def _serving(serve: Callable[..., ServeProcess], redis: RedisServer, broker: MosquittoServer,
             tmp_path: Path) -> tuple[ServeProcess, Path]:  # fmt: skip
    port = free_port()
    path = console_pipeline(tmp_path, redis.url, port)
    cfg = yaml.safe_load(path.read_text())
    cfg["sinks"] = [{"type": "mqtt", "name": "ha", "url": broker.url, "state_interval": 0.2,
                     "reconnect_initial": 0.1, "reconnect_max": 0.5}]  # fmt: skip
    cfg["record"] = {"dir": str(tmp_path / "rec"), "clips": {"enabled": True, "after_s": 30}}
    cfg["runtime"]["status_interval"] = 0.5
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = serve(None, path=path, http_port=port, env={"CONSOLE_TOKEN": TOKEN}, status=True)
    proc.wait_for(
        lambda: all(proc.camera(c).get("state") == "streaming" for c in "ab"), 120, "a and b"
    )
    return proc, path


def test_add_and_remove_each_kind_while_serving(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    broker = MosquittoServer(tmp_path / "mosquitto")
    broker.start()
    try:
        _run(serve, redis_server, broker, tmp_path)
    finally:
        broker.stop()


def _run(serve: Callable[..., ServeProcess], redis: RedisServer, broker: MosquittoServer,
         tmp_path: Path) -> None:  # fmt: skip
    clip = _scene(tmp_path)
    proc, path = _serving(serve, redis, broker, tmp_path)
    w = Watch(proc, redis, broker)
    client = redis.client()
    new = {"id": "c", "url": str(clip), "realtime": True, "loop": True}

    # Refused adds change nothing (the file, the cameras).
    original = path.read_text()
    code, reply = call(proc.http_port, "POST", "/api/cameras", {**new, "id": "a"}, token=TOKEN)
    assert code == 409 and fields(reply) == ["cameras.a"]
    code, reply = call(proc.http_port, "POST", "/api/cameras", {"id": "c", "url": "gopher://x"},
                       token=TOKEN)  # fmt: skip
    assert code == 422 and any(f.startswith("cameras[2].url") for f in fields(reply)), reply
    assert path.read_text() == original

    # -- camera c added ---------------------------------------------------------------
    n = len(w.status_lines())
    assert w.change("POST", "/api/cameras", new, 201)["id"] == "c"
    proc.wait_for(lambda: proc.camera("c").get("state") == "streaming", 30, "c streams")
    assert w.status_after(n) == ["a", "b", "c"]
    assert proc.readyz()["ready"] and "c" in proc.readyz()["cameras"]
    proc.wait_for(
        lambda: w.gauges(camera="c").get("streamseg_ingest_health") == 1, 10, "c's health gauge"
    )
    assert "c" in call(proc.http_port, "GET", "/api/cameras")[1]["cameras"]
    assert call(proc.http_port, "GET", "/api/cameras/c/frame.png")[0] == 200
    proc.wait_for(lambda: len(detections(client, "c")) >= 3, 30, "c on Redis")

    def c_state() -> Any:
        return (w.retained_state("c") or {}).get("health", {}).get("state") == "streaming"

    proc.wait_for(c_state, 20, "c's retained MQTT state")

    # -- a zone, a line, a rule on each: alerts, counts, gauges ----------------------
    w.change("POST", "/api/cameras/c/zones", {"name": "all", **FULL}, 201)
    w.change("POST", "/api/cameras/c/lines", {"name": "mid", **LINE}, 201)
    w.change("POST", "/api/cameras/c/rules", {"name": "in-all", "type": "zone", "zone": "all"}, 201)
    w.change("POST", "/api/cameras/c/rules", {"name": "cross", "type": "line", "line": "mid"}, 201)
    section = w.section("c")
    assert set(section["zones"]) == {"all"} and set(section["lines"]) == {"mid"}
    assert [r["name"] for r in section["rules"]] == ["in-all", "cross"]
    occupancy = 'streamseg_track_rules_occupancy{camera="c"'
    proc.wait_for(lambda: occupancy in proc.get("/metrics")[1], 20, "c's occupancy gauge")
    sub = MQTTSubscriber(broker, "streamseg/alerts", persistent=False)

    def alerts() -> list[dict[str, Any]]:
        return [json.loads(f[b"data"]) for _i, f in client.xrange("streamseg:alerts")]

    proc.wait_for(lambda: any(a["rule"] == "in-all" for a in alerts()), 60, "an alert of c")
    sub.wait_for(1, "streamseg/alerts", timeout=10)  # the same alerts on MQTT
    sub.close()

    def clip_of_c() -> Any:
        events = call(proc.http_port, "GET", "/api/events?camera=c")[1]["events"]
        return next((e for e in events if e["clip"]), None)

    event = proc.wait_for(clip_of_c, 30, "a clip of c's alert being recorded")
    assert event["clip_ready"] is False  # after_s is 30: it is still being written
    assert w.status_after(len(w.status_lines())) == ["a", "b", "c"]

    # -- each removed again --------------------------------------------------------------
    w.change("DELETE", "/api/cameras/c/rules/in-all")
    w.change("DELETE", "/api/cameras/c/rules/cross")
    proc.wait_for(lambda: occupancy not in proc.get("/metrics")[1], 10, "c's occupancy gone")
    w.change("DELETE", "/api/cameras/c/lines/mid")
    w.change("DELETE", "/api/cameras/c/zones/all")
    assert w.section("c") == {"coordinates": "pixels", "zones": {}, "lines": {}, "rules": []}
    assert "c" not in (yaml.safe_load(path.read_text())["alerts"]["cameras"] or {})
    n_alerts = len([a for a in alerts() if a["camera_id"] == "c"])
    time.sleep(1.0)
    assert len([a for a in alerts() if a["camera_id"] == "c"]) == n_alerts  # no rule, no alert

    # -- camera b changed, camera c removed -----------------------------------------
    code, cam = call(proc.http_port, "PUT", "/api/cameras/b",
                     {"id": "b", "url": "synthetic://?seed=2&width=160&height=120&fps=8&objects=3",
                      "max_fps": 4}, token=TOKEN)  # fmt: skip
    assert code == 200 and cam["max_fps"] == 4, cam
    n = len(w.status_lines())
    w.change("DELETE", "/api/cameras/c")
    assert w.status_after(n) == ["a", "b"]
    assert "c" not in proc.readyz()["cameras"] and proc.readyz()["ready"]
    assert w.gauges(camera="c") == {} and not w.queue_gauge("c")
    assert "c" not in call(proc.http_port, "GET", "/api/cameras")[1]["cameras"]
    assert call(proc.http_port, "GET", "/api/cameras/c/frame.png")[0] == 404
    proc.wait_for(lambda: w.retained_state("c") is None, 10, "c's retained state cleared")
    assert w.retained_state("a") is not None
    # Its clip was finished when it left (not 30 s later): the console serves it, it plays.
    event = proc.wait_for(clip_of_c, 10, "c's event")
    assert event["clip_ready"] is True, event
    code, data = call(proc.http_port, "GET", event["clip"])
    assert code == 200 and isinstance(data, bytes)
    (tmp_path / "c.mp4").write_bytes(data)
    with av.open(str(tmp_path / "c.mp4")) as container:
        assert sum(1 for _ in container.decode(video=0)) > 0
    n_c = len(detections(client, "c"))
    proc.wait_for(lambda: len(detections(client, "a")) >= 10, 20, "a goes on")
    assert len(detections(client, "c")) <= n_c + 4  # at most what was in flight

    # c added again under the same id: served afresh, everywhere.
    n = len(w.status_lines())
    w.change("POST", "/api/cameras", new, 201)
    proc.wait_for(lambda: proc.camera("c").get("state") == "streaming", 30, "c streams again")
    assert w.status_after(n) == ["a", "b", "c"]
    proc.wait_for(lambda: w.retained_state("c") is not None, 20, "c's state again")
    # b removed with its alerts section (zone "left"): gone from the file too.
    n = len(w.status_lines())
    w.change("DELETE", "/api/cameras/b")
    saved = yaml.safe_load(path.read_text())
    assert [c["id"] for c in saved["cameras"]] == ["a", "c"]
    assert "b" not in (saved["alerts"]["cameras"] or {})
    assert w.status_after(n) == ["a", "c"]

    # Camera a lost nothing to the changes: a live camera skips only its oldest frames,
    # when the model is behind (this machine is shared), and loses none.
    lost = [
        s
        for family in text_string_to_metric_families(proc.get("/metrics")[1])
        for s in family.samples
        if s.name == "streamseg_frames_lost_total" and s.labels.get("camera") == "a"
    ]
    assert sum(s.value for s in lost) == 0, lost
    assert proc.terminate() == 0, proc.tail()
    assert "Exception in thread" not in proc.log and "Traceback" not in proc.log, proc.tail(80)
    assert summary(proc.log, "a")["published"] > 0 and summary(proc.log, "c")["published"] > 0
    assert TOKEN not in proc.log
