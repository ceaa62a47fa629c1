"""The Redis Streams sink against a real redis-server: pipelining, outages, buffering, auth.

The outage buffer, the writer thread and the reconnects are ``BufferedSink``'s,
shared by every sink; here they are exercised through the Redis one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from streamseg.backoff import ReconnectPolicy
from streamseg.publish.connect import redis_client
from streamseg.publish.delivery import DeliveryOptions
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import RedisStreamsSink, build_sink
from streamseg.publish.sink import Message
from tests.support.servers import RedisServer


class Recorder:
    """What a sink reported to its listener."""

    def __init__(self) -> None:
        self.published: list[Message] = []
        self.dropped: list[Message] = []
        self.errors: list[tuple[str, str]] = []
        self.attempts: list[bool] = []


class Listener:
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def published(self, sink: str, messages: Sequence[Message]) -> None:
        self.rec.published.extend(messages)

    def dropped(self, sink: str, messages: Sequence[Message]) -> None:
        self.rec.dropped.extend(messages)

    def error(self, sink: str, op: str, kind: str) -> None:
        self.rec.errors.append((op, kind))

    def reconnect(self, sink: str, ok: bool) -> None:
        self.rec.attempts.append(ok)


def message(i: int, camera: str = "a", kind: str = "detections") -> Message:
    return Message(kind=kind, camera=camera, data=json.dumps({"i": i}).encode())


def start(url: str, **kw) -> tuple[RedisStreamsSink, Recorder]:  # type: ignore[no-untyped-def]
    """A sink writing to streams ``t:...``; ``kw``: ``maxlen``, ``wait`` (seconds between
    reconnects; fast by default) or ``DeliveryOptions`` fields."""
    sink_kw = {k: kw.pop(k) for k in ("maxlen", "alerts_maxlen") if k in kw}
    wait = kw.pop("wait", None)  # one wait, seconds, after every failure
    waits = ReconnectPolicy(initial=wait or 0.05, max_delay=wait or 0.2)
    delivery = DeliveryOptions(**{"reconnect": waits, **kw})
    cfg = RedisConfig(url=url)
    sink = RedisStreamsSink(
        client_factory=lambda: redis_client(cfg, socket_timeout=2),
        stream_prefix="t",
        delivery=delivery,
        **sink_kw,
    )
    rec = Recorder()
    sink.start(Listener(rec))
    wait_until(lambda: sink.connected or rec.errors != [], "first connection attempt")
    return sink, rec


def wait_until(cond: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def stream_values(server: RedisServer, stream: str) -> list[int]:
    return [json.loads(f[b"data"])["i"] for _id, f in server.client().xrange(stream)]


def test_publishes_in_order_with_pipelining(redis_server: RedisServer) -> None:
    sink, rec = start(redis_server.url, max_batch=16)
    sink.submit([message(i) for i in range(100)])
    sink.submit([message(100, kind="alert")])
    assert sink.flush(timeout=10)
    assert stream_values(redis_server, "t:detections:a") == list(range(100))
    assert stream_values(redis_server, "t:alerts") == [100]
    health = sink.health()
    assert len(rec.published) == 101 and health.published == 101 and health.buffered == 0
    assert health.name == "redis" and health.type == "redis" and health.connected
    assert sink.close() == 0


def test_maxlen_trims_approximately(redis_server: RedisServer) -> None:
    sink, _ = start(redis_server.url, maxlen=10)
    sink.submit([message(i) for i in range(2000)])
    assert sink.flush(timeout=10)
    n = redis_server.client().xlen("t:detections:a")
    assert 10 <= n < 2000
    sink.close()


def test_outage_buffers_then_resumes_in_order(redis_server: RedisServer) -> None:
    sink, rec = start(redis_server.url)
    sink.submit([message(i) for i in range(5)])
    assert sink.flush(timeout=10)
    assert rec.errors == [] and rec.attempts == []  # the first connection is not a reconnect
    redis_server.stop()
    sink.submit([message(i) for i in range(5, 20)])  # returns at once: buffered
    wait_until(lambda: len(rec.attempts) >= 2, "failed reconnect attempts")
    assert not sink.connected and sink.buffered == 15
    assert rec.errors[0] == ("xadd", "ConnectionError")  # the round trip that found Redis gone
    redis_server.start()
    assert sink.flush(timeout=10)
    assert sink.connected and sink.reconnects == 1
    # every failed attempt is an error and a failed reconnect; the last one succeeded
    attempts = list(rec.attempts)
    assert attempts[-1] is True and attempts.count(True) == 1
    assert sink.reconnect_attempts == len(attempts)
    assert rec.errors[1:] == [("connect", "ConnectionError")] * (len(attempts) - 1)
    assert sink.errors == len(rec.errors)
    # The restarted server has no data (no persistence): the buffered ones arrive, in order.
    assert stream_values(redis_server, "t:detections:a") == list(range(5, 20))
    assert sink.dropped == 0 and rec.dropped == []
    sink.close()


def test_buffer_overflow_drops_oldest_and_counts(redis_server: RedisServer) -> None:
    sink, rec = start(redis_server.url, buffer_max=10)
    redis_server.stop()
    sink.submit([message(i) for i in range(25)])
    assert sink.dropped == 15
    assert [json.loads(m.data)["i"] for m in rec.dropped] == list(range(15))
    wait_until(lambda: not sink.connected, "the outage noticed")
    assert sink.buffered == 10
    redis_server.start()
    assert sink.flush(timeout=10)
    assert stream_values(redis_server, "t:detections:a") == list(range(15, 25))
    sink.close()


def test_submit_does_not_block_while_down(redis_server: RedisServer) -> None:
    redis_server.stop()
    sink, rec = start(redis_server.url, wait=5.0)
    t0 = time.monotonic()
    for i in range(50):
        sink.submit([message(i)])
    assert time.monotonic() - t0 < 1.0
    assert sink.buffered == 50
    time.sleep(0.5)
    assert rec.attempts == []  # backing off: no second attempt yet
    assert not sink.flush(timeout=0.2)
    assert sink.close() == 50  # given up at shutdown: dropped and reported
    assert len(rec.dropped) == 50 and sink.dropped == 50


def test_rejected_entries_are_dropped_and_counted(redis_server: RedisServer) -> None:
    redis_server.client().set("t:detections:a", "not a stream")
    sink, rec = start(redis_server.url)
    sink.submit([message(0), message(1, camera="b"), message(2)])
    assert sink.flush(timeout=10)
    assert sink.dropped == 2 and sink.errors == 2
    assert rec.errors == [("xadd", "ResponseError")] * 2  # one per rejected entry
    assert stream_values(redis_server, "t:detections:b") == [1]
    sink.close()


def test_password_from_config_and_no_secret_in_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path, password="s3cret-pw")
    server.start()
    try:
        url = f"redis://127.0.0.1:{server.port}/0"
        good = build_sink(RedisConfig(url=url, password="s3cret-pw", stream_prefix="t"))
        good.start()
        good.submit([message(0)])
        assert good.flush(timeout=10)
        assert stream_values(server, "t:detections:a") == [0]
        good.close()
        caplog.set_level(logging.DEBUG, logger="streamseg.publish")
        bad = build_sink(RedisConfig(url=url, password="wrong-pw-123", stream_prefix="t"))
        bad.start()
        bad.submit([message(1)])
        wait_until(lambda: bad.errors > 0, "the refused login")
        assert not bad.connected and bad.buffered == 1
        bad.close()
        assert "unavailable" in caplog.text
        assert "wrong-pw-123" not in caplog.text
    finally:
        server.stop()
