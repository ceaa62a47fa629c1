"""``streamseg subscribe`` prints what the publish stage wrote (real redis-server)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from streamseg.publish.encode import MessageEncoder
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import build_sink
from streamseg.types import Event, Frame, FrameResult, Instances
from tests.conftest import REPO
from tests.support.servers import RedisServer, cli_env, make_tls_files, wait_blocked

NAMES = ("__background__", "thing")


def publish(
    server: RedisServer, cameras: dict[str, int], alerts: int = 0, cfg: RedisConfig | None = None
) -> None:
    """``cameras``: camera -> number of frames; each frame's message has one instance."""
    sink = build_sink(cfg or RedisConfig(url=server.url, maxlen=1000, alerts_maxlen=1000))
    sink.start()
    encoder = MessageEncoder(arch="maskrcnn_small", class_names=NAMES)
    items = []
    for cam, n in cameras.items():
        for seq in range(n):
            frame = Frame(
                cam, seq, seq / 10, time.time(), torch.zeros((4, 6, 3), dtype=torch.uint8)
            )
            inst = Instances(
                image_size=(4, 6),
                boxes=torch.tensor([[0.0, 0.0, 2.0, 2.0]]),
                scores=torch.tensor([0.8]),
                labels=torch.tensor([1]),
                masks=torch.ones((1, 4, 6), dtype=torch.bool),
            )
            events = [
                Event(rule="r", kind="enter", camera_id=cam, time=1.0, frame_seq=seq, zone="z")
            ] if seq < alerts else []  # fmt: skip
            items.append((FrameResult(frame.without_image(), inst), events))
    sink.submit(encoder.encode(items))
    assert sink.flush(5)
    assert sink.close() == 0


def lines(proc: subprocess.CompletedProcess[str]) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_reads_everything_from_start(cli, redis_server: RedisServer) -> None:  # type: ignore[no-untyped-def]
    publish(redis_server, {"a": 3, "b": 2})
    proc = cli("subscribe", "--redis", redis_server.url, "--from-start", "--count", "5")
    assert proc.returncode == 0, proc.stderr
    got = lines(proc)
    assert sorted((m["camera"], m["seq"]) for m in got) == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1),
    ]  # fmt: skip
    assert all(
        m["type"] == "detections" and m["instances"][0]["label_name"] == "thing" for m in got
    )


def test_camera_and_alerts_filters(cli, redis_server: RedisServer) -> None:  # type: ignore[no-untyped-def]
    publish(redis_server, {"a": 3, "b": 2}, alerts=2)
    proc = cli(
        "subscribe", "--redis", redis_server.url, "--from-start", "--camera", "b", "--count", "2",
        "--envelope",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = lines(proc)
    assert {m["stream"] for m in got} == {"streamseg:detections:b"}
    assert [m["message"]["seq"] for m in got] == [0, 1]
    proc = cli("subscribe", "--redis", redis_server.url, "--from-start", "--alerts", "--count", "4")
    assert proc.returncode == 0, proc.stderr
    alerts = lines(proc)
    assert [(m["type"], m["camera_id"], m["frame_seq"]) for m in alerts] == [
        ("alert", "a", 0), ("alert", "a", 1), ("alert", "b", 0), ("alert", "b", 1),
    ]  # fmt: skip


def test_tails_new_messages(redis_server: RedisServer) -> None:
    publish(redis_server, {"a": 2})  # already there: not printed when tailing
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamseg", "subscribe", "--redis", redis_server.url,
         "--camera", "a", "--count", "3", "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=REPO,
    )  # fmt: skip
    try:
        client = redis_server.client()
        # Wait until it blocks in XREAD: its position is taken (start-up time varies).
        deadline = time.monotonic() + 60
        while not any(c.get("cmd") == "xread" for c in client.client_list()):
            assert proc.poll() is None and time.monotonic() < deadline, "subscribe never read"
            time.sleep(0.05)
        for seq in range(3):
            client.xadd("streamseg:detections:a", {"data": json.dumps({"seq": 100 + seq})})
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [100, 101, 102]


def test_consumer_group_acknowledges(cli, redis_server: RedisServer) -> None:  # type: ignore[no-untyped-def]
    publish(redis_server, {"a": 4})
    args = ["subscribe", "--redis", redis_server.url, "--camera", "a", "--from-start",
            "--group", "g1", "--consumer", "c1"]  # fmt: skip
    first = cli(*args, "--count", "3")
    assert first.returncode == 0, first.stderr
    assert [m["seq"] for m in lines(first)] == [0, 1, 2]
    # The group remembers: the next read continues after what was acknowledged.
    second = cli(*args, "--count", "1")
    assert [m["seq"] for m in lines(second)] == [3]
    pending = redis_server.client().xpending("streamseg:detections:a", "g1")
    assert pending["pending"] == 0


def test_unreachable_redis_exit_1(cli) -> None:  # type: ignore[no-untyped-def]
    proc = cli("subscribe", "--redis", "redis://:pw123@127.0.0.1:1/0", "--count", "1")
    assert proc.returncode == 1
    assert "cannot reach Redis" in proc.stderr and "pw123" not in proc.stderr


def test_usage_errors(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("subscribe", "--consumer", "x").returncode == 2
    assert cli("subscribe", "--count", "0").returncode == 2


def test_pipeline_section_connects_over_mutual_tls(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """``--pipeline`` takes the service's url, ``${REDIS_PASSWORD}``, CA and client
    certificate: the sink and ``subscribe`` both reach a TLS-only, client-cert Redis."""
    files = make_tls_files(tmp_path / "pki")
    server = RedisServer(tmp_path, password="tls-pw-77", tls=files, client_certs=True)
    server.start()
    try:
        tls = {"ca_file": str(files.ca), "cert_file": str(files.client_cert),
               "key_file": str(files.client_key)}  # fmt: skip
        section = {"url": f"rediss://127.0.0.1:{server.port}/0", "password": "${REDIS_PASSWORD}",
                   "tls": tls, "stream_prefix": "site7"}  # fmt: skip
        cfg = RedisConfig.model_validate({**section, "password": "tls-pw-77"})
        publish(server, {"a": 2}, cfg=cfg)
        path = tmp_path / "pipeline.yaml"
        path.write_text(json.dumps({"cameras": [{"id": "a", "url": "synthetic://"}],
                                    "redis": section}))  # fmt: skip
        monkeypatch.setenv("REDIS_PASSWORD", "tls-pw-77")
        proc = cli("subscribe", "--pipeline", str(path), "--from-start", "--count", "2")
        assert proc.returncode == 0, proc.stderr
        assert [m["seq"] for m in lines(proc)] == [0, 1]
        # Without the client certificate the same server refuses the connection.
        bare = cli("subscribe", "--redis", cfg.url, "--from-start", "--count", "1")
        assert bare.returncode == 1 and "tls-pw-77" not in bare.stderr
    finally:
        server.stop()


def test_pipeline_needs_only_its_redis_section(
    cli, redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A subscriber reads ``redis:`` alone (``swap``, ``redis:`` and ``model:``): the
    console's ``${STREAMSEG_HTTP_TOKEN}`` and a camera's ``${CAM_URL}``, both unset,
    are not asked for; a mistake in ``redis:`` itself is still told with its line."""
    publish(redis_server, {"a": 1})
    monkeypatch.delenv("STREAMSEG_HTTP_TOKEN", raising=False)
    monkeypatch.delenv("CAM_URL", raising=False)
    monkeypatch.setenv("SWAP_TOK", "swap-tok-31")
    path = tmp_path / "pipeline.yaml"
    text = (
        "cameras:\n  - id: a\n    url: ${CAM_URL}\n\nhttp:\n  token: ${STREAMSEG_HTTP_TOKEN}\n\n"
        "model:\n  swap_token: ${SWAP_TOK}\n\n"
        f"redis:\n  url: {redis_server.url}\n"
    )
    path.write_text(text)
    proc = cli("subscribe", "--pipeline", str(path), "--from-start", "--count", "1")
    assert proc.returncode == 0, proc.stderr
    assert [m["camera"] for m in lines(proc)] == ["a"]
    proc = cli("swap", "--pipeline", str(path), "new.pth", "--wait", "0")
    assert proc.returncode == 0 and json.loads(proc.stdout)["sent"] is True, proc.stderr
    ((_id, fields),) = redis_server.client().xrange("streamseg:control")
    assert json.loads(fields[b"data"])["token"] == "swap-tok-31"  # the model section's
    path.write_text(text + "  stream_prefx: site7\n")
    proc = cli("subscribe", "--pipeline", str(path), "--count", "1")
    assert proc.returncode == 2
    assert "pipeline.yaml:13: redis.stream_prefx: unknown key" in proc.stderr
    assert "did you mean 'stream_prefix'" in proc.stderr and "HTTP_TOKEN" not in proc.stderr


def test_group_survives_redis_restart(tmp_path: Path) -> None:
    """A running ``subscribe --group`` reconnects after Redis restarts and misses nothing."""
    server = RedisServer(tmp_path, persist=True)
    server.start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamseg", "subscribe", "--redis", server.url, "--camera", "a",
         "--group", "g", "--consumer", "c", "--count", "4", "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=REPO,
    )  # fmt: skip
    try:
        wait_blocked(server, "xreadgroup", timeout=60)
        client = server.client()
        for seq in range(2):
            client.xadd("streamseg:detections:a", {"data": json.dumps({"seq": seq})})
        server.stop()
        server.start()
        client = server.client()
        for seq in range(2, 4):
            client.xadd("streamseg:detections:a", {"data": json.dumps({"seq": seq})})
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        server.stop()
    assert proc.returncode == 0, err
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [0, 1, 2, 3]
