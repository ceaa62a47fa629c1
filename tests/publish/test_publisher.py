"""RedisPublisher against a real redis-server: pipelining, outages, buffering, auth."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from streamseg.config.redis import RedisConfig
from streamseg.publish.connect import client_from_config, redis_client
from streamseg.publish.publisher import Outgoing, RedisPublisher
from tests.support.servers import RedisServer


def entry(i: int, stream: str = "t:detections:a", maxlen: int = 1000) -> Outgoing:
    return Outgoing(stream=stream, data=json.dumps({"i": i}).encode(), maxlen=maxlen, kind="x")


def publisher(url: str, **kw) -> RedisPublisher:  # type: ignore[no-untyped-def]
    kw.setdefault("reconnect_initial", 0.05)
    kw.setdefault("reconnect_max", 0.2)
    return RedisPublisher(client_factory=lambda: redis_client(url=url, socket_timeout=2), **kw)


def stream_values(server: RedisServer, stream: str) -> list[int]:
    return [json.loads(f[b"data"])["i"] for _id, f in server.client().xrange(stream)]


def test_publishes_in_order_with_pipelining(redis_server: RedisServer) -> None:
    acked: list[Outgoing] = []
    pub = publisher(redis_server.url, max_batch=16, on_published=acked.extend)
    assert pub.connect()
    pub.submit([entry(i) for i in range(100)])
    pub.submit([entry(100, stream="t:alerts")])
    assert pub.buffered == 0
    assert stream_values(redis_server, "t:detections:a") == list(range(100))
    assert stream_values(redis_server, "t:alerts") == [100]
    assert len(acked) == 101 and pub.published == 101


def test_maxlen_trims_approximately(redis_server: RedisServer) -> None:
    pub = publisher(redis_server.url)
    pub.submit([entry(i, maxlen=10) for i in range(2000)])
    n = redis_server.client().xlen("t:detections:a")
    assert 10 <= n < 2000


def test_outage_buffers_then_resumes_in_order(redis_server: RedisServer) -> None:
    errors: list[tuple[str, str]] = []
    attempts: list[bool] = []
    pub = publisher(
        redis_server.url,
        on_error=lambda op, kind: errors.append((op, kind)),
        on_reconnect=attempts.append,
    )
    pub.submit([entry(i) for i in range(5)])
    assert errors == [] and attempts == []  # the first connection is not a reconnect
    redis_server.stop()
    pub.submit([entry(i) for i in range(5, 20)])  # no exception: buffered
    assert not pub.connected
    assert pub.buffered == 15
    assert errors == [("xadd", "ConnectionError")]  # the round trip that found Redis gone
    time.sleep(0.3)
    pub.poll()  # a reconnect attempt, refused
    redis_server.start()
    assert pub.flush(timeout=10)
    assert pub.connected and pub.reconnects == 1
    # every failed attempt is an error and a failed reconnect; the last one succeeded
    assert attempts[-1] is True and attempts.count(True) == 1 and len(attempts) >= 2
    assert pub.reconnect_attempts == len(attempts)
    assert errors[1:] == [("connect", "ConnectionError")] * (len(attempts) - 1)
    assert pub.errors == len(errors)
    # The restarted server has no data (no persistence): the buffered ones arrive, in order.
    assert stream_values(redis_server, "t:detections:a") == list(range(5, 20))
    assert pub.dropped == 0


def test_buffer_overflow_drops_oldest_and_counts(redis_server: RedisServer) -> None:
    dropped: list[Outgoing] = []
    pub = publisher(redis_server.url, buffer_max=10, on_dropped=dropped.extend)
    pub.connect()
    redis_server.stop()
    pub.submit([entry(i) for i in range(25)])
    assert pub.buffered == 10 and pub.dropped == 15
    assert [json.loads(e.data)["i"] for e in dropped] == list(range(15))
    redis_server.start()
    assert pub.flush(timeout=10)
    assert stream_values(redis_server, "t:detections:a") == list(range(15, 25))


def test_submit_does_not_block_while_down(redis_server: RedisServer) -> None:
    pub = publisher(redis_server.url, reconnect_initial=5.0, reconnect_max=5.0)
    redis_server.stop()
    t0 = time.monotonic()
    for i in range(50):
        pub.submit([entry(i)])
    assert time.monotonic() - t0 < 2.0  # one failed attempt, then backoff
    assert pub.buffered == 50
    retry = pub.retry_in()
    assert retry is not None and retry > 1.0


def test_rejected_entries_are_dropped_and_counted(redis_server: RedisServer) -> None:
    redis_server.client().set("t:detections:a", "not a stream")
    errors: list[tuple[str, str]] = []
    pub = publisher(redis_server.url, on_error=lambda op, kind: errors.append((op, kind)))
    pub.submit([entry(0), entry(1, stream="t:detections:b"), entry(2)])
    assert pub.buffered == 0
    assert pub.dropped == 2 and pub.errors == 2
    assert errors == [("xadd", "ResponseError")] * 2  # one per rejected entry
    assert stream_values(redis_server, "t:detections:b") == [1]


def test_password_from_config_and_no_secret_in_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path, password="s3cret-pw")
    server.start()
    try:
        good = RedisConfig(url=f"redis://127.0.0.1:{server.port}/0", password="s3cret-pw")
        pub = RedisPublisher(client_factory=lambda: client_from_config(good))
        assert pub.connect()
        bad = RedisConfig(url=f"redis://127.0.0.1:{server.port}/0", password="wrong-pw-123")
        caplog.set_level(logging.DEBUG, logger="streamseg.publish")
        pub_bad = RedisPublisher(
            client_factory=lambda: client_from_config(bad), secrets=["wrong-pw-123"]
        )
        pub_bad.submit([entry(0)])
        assert not pub_bad.connected and pub_bad.buffered == 1
        assert "unavailable" in caplog.text
        assert "wrong-pw-123" not in caplog.text
    finally:
        server.stop()
