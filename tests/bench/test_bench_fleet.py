"""``streamseg bench fleet``: three real ``serve`` workers, six RTSP cameras, one Redis.

The one long test of the fleet (a few minutes on two shared cores: three
model loads at the start and two restarts): it runs the benchmark of issue
33 once and checks every goal on its JSON, and that the messages it left in
Redis carry the worker and the epoch and match the published schema. The
cameras are the smallest that run: 160x120 at 4 frames/s, the small Mask
R-CNN with random weights, one torch thread per worker.
"""

from __future__ import annotations

import json
from pathlib import Path

from streamseg.client.validate import SchemaValidator
from tests.support.rtsp import RtspServer
from tests.support.serve import FAST_RECONNECT, service_pipeline
from tests.support.servers import RedisServer


def test_bench_fleet_meets_the_failover_goals(
    tmp_path: Path, cli, redis_server: RedisServer, rtsp_server_factory
) -> None:  # type: ignore[no-untyped-def]
    rtsp: RtspServer = rtsp_server_factory(fps=4)
    cameras = [{"id": f"cam{i}", "url": rtsp.url, "reconnect": FAST_RECONNECT} for i in range(6)]
    config = service_pipeline(cameras, {"url": redis_server.url}, tracking={"enabled": False})
    # Room for a second of frames per camera: a busy shared machine must not make the
    # cameras that stay drop frames while the others move.
    config["runtime"] = {**config["runtime"], "camera_queue": 8}
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(config))

    done = cli("bench", "fleet", str(path), "--lease-s", "4", "--settle", "3", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    print(json.dumps({k: v for k, v in result.items() if k != "phases"}, indent=1))
    for name, phase in result["phases"].items():
        print(name, {k: v for k, v in phase.items() if k != "cameras"})

    phases = result["phases"]
    assert list(phases) == ["kill", "join", "term", "rejoin", "cut", "return"]
    for name, phase in phases.items():
        assert phase["moved"] >= 1, name
        assert phase["stayed_lost"] == 0, (name, phase["cameras"])
        assert phase["duplicated"] == 0, (name, phase["cameras"])
    assert phases["kill"]["max_gap_s"] <= 10.0
    assert phases["term"]["max_gap_s"] <= 3.0
    # Cut off, a worker's cameras move; back, it takes the same ones again.
    cut = {c for c, r in phases["cut"]["cameras"].items() if r["moved"]}
    back = {c for c, r in phases["return"]["cameras"].items() if r["moved"]}
    assert cut == back
    assert all(phases["return"]["cameras"][c]["to"] == phases["cut"]["worker"] for c in back)
    assert result["two_at_once"] == 0

    client = redis_server.client()
    validator = SchemaValidator()
    streams = sorted(client.scan_iter(match="fleetbench-*:detections:*"))
    assert len(streams) == 6
    for stream in streams:
        (_id, fields), *_ = client.xrevrange(stream, count=1)
        message = json.loads(fields[b"data"])
        validator.check(message, expect="detections", where=stream.decode())
        assert message["worker"] in {"w0", "w1", "w2"} and message["epoch"] >= 1
