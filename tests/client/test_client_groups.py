"""Reading through Redis restarts: with a consumer group nothing is lost and nothing
acknowledged comes twice; without one, reading goes on after the last entry read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamseg.client import Backoff, Client, ClientError
from tests.support.publishing import frames, publish
from tests.support.servers import RedisServer, wait_blocked

STREAM = "streamseg:detections:gate"
FAST = Backoff(initial=0.05, max=0.5)


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that keeps its streams, groups and acknowledgements across restarts."""
    server = RedisServer(tmp_path, persist=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def pending(server: RedisServer, group: str) -> int:
    return int(server.client().xpending(STREAM, group)["pending"])


def test_group_through_restart_loses_nothing(durable_redis: RedisServer) -> None:
    server = durable_redis
    publish(server.url, frames("gate", range(6)))
    got: list[int] = []
    client = Client(server.url, block=0.2, batch=4, backoff=FAST)
    sub = client.detections(["gate"], start="begin", group="g", consumer="c1", limit=12,
                            idle_timeout=30)  # fmt: skip
    reader = threading.Thread(target=lambda: got.extend(f.seq for f in sub))
    reader.start()
    wait_blocked(server, "xreadgroup")  # read all six, waiting for more
    server.stop()
    server.start()
    publish(server.url, frames("gate", range(6, 12)))
    reader.join(30)
    assert not reader.is_alive()
    assert got == list(range(12))  # none lost, none twice
    assert sub.reconnects >= 1
    assert pending(server, "g") == 0  # every one acknowledged
    # Acknowledged before a restart stays acknowledged after it.
    server.stop()
    server.start()
    again = Client(server.url, backoff=FAST).detections(["gate"], group="g", consumer="c1",
                                                       idle_timeout=0.5)  # fmt: skip
    assert list(again) == []


def test_unacknowledged_are_read_again(durable_redis: RedisServer) -> None:
    """A consumer that stops before acknowledging gets those messages again, after a
    restart of Redis too; acknowledged ones never come back."""
    server = durable_redis
    publish(server.url, frames("gate", range(5)))
    client = Client(server.url, backoff=FAST)
    first = client.detections(["gate"], start="begin", group="g", consumer="c1", auto_ack=False)
    a, b, c = next(first), next(first), next(first)
    first.ack(a)
    first.close()  # b and c never acknowledged: as if the consumer died
    assert pending(server, "g") >= 2
    server.stop()
    server.start()
    second = Client(server.url, backoff=FAST, batch=1).detections(
        ["gate"], group="g", consumer="c1", idle_timeout=0.5
    )
    assert [f.seq for f in second] == [b.seq, c.seq, 3, 4]
    assert pending(server, "g") == 0


def test_acknowledgement_held_through_an_outage(durable_redis: RedisServer) -> None:
    """Acks that cannot be sent while Redis is away are sent when it is back."""
    server = durable_redis
    publish(server.url, frames("gate", range(4)))
    sub = Client(server.url, batch=2, backoff=FAST).detections(
        ["gate"], start="begin", group="g", consumer="c1"
    )
    seen = [next(sub).seq, next(sub).seq]  # two fetched, both handed out, the first acked
    server.stop()
    back = threading.Timer(0.5, server.start)
    back.start()
    seen.append(next(sub).seq)  # waits for Redis, sends the acks, reads on
    back.join()
    seen.append(next(sub).seq)
    sub.close()
    assert seen == [0, 1, 2, 3] and sub.reconnects == 1
    # Three acknowledged; the last one was being processed when close() came.
    assert pending(server, "g") == 1
    rest = Client(server.url).detections(["gate"], group="g", consumer="c1", idle_timeout=0.3)
    assert [f.seq for f in rest] == [3]


def test_two_consumers_share_a_group(redis_server: RedisServer) -> None:
    publish(redis_server.url, frames("gate", range(10)))
    client = Client(redis_server.url, batch=1)
    one = client.detections(["gate"], start="begin", group="g", consumer="one")
    two = client.detections(["gate"], start="begin", group="g", consumer="two")
    seqs = []
    for _ in range(5):
        seqs += [next(one).seq, next(two).seq]
    one.close()
    two.close()
    assert sorted(seqs) == list(range(10))


def test_gives_up_after_max_outage(redis_server: RedisServer) -> None:
    publish(redis_server.url, frames("gate", range(1)))
    client = Client(redis_server.url, backoff=Backoff(initial=0.05, max=0.1, max_outage=0.5))
    sub = client.detections(["gate"], start="begin")
    next(sub)
    redis_server.stop()
    with pytest.raises(ClientError, match=r"Redis unreachable for \d+s .*max_outage=0.5s"):
        next(sub)


def test_handed_out_not_acknowledged_not_handed_twice(durable_redis: RedisServer) -> None:
    """After an outage the pending entries are read again, except the ones this reader
    already handed out and still waits to be acknowledged."""
    server = durable_redis
    publish(server.url, frames("gate", range(3)))
    sub = Client(server.url, batch=1, backoff=FAST).detections(
        ["gate"], start="begin", group="g", consumer="c1", auto_ack=False
    )
    a = next(sub)
    server.stop()
    back = threading.Timer(0.5, server.start)
    back.start()
    b = next(sub)  # waits for Redis, then reads its pending entries (the first one: held)
    back.join()
    assert (a.seq, b.seq) == (0, 1) and sub.reconnects == 1
    sub.ack(a)
    sub.ack(b)
    sub.close()
    assert pending(server, "g") == 0


def test_without_group_resumes_after_last_read(durable_redis: RedisServer) -> None:
    server = durable_redis
    publish(server.url, frames("gate", range(4)))
    sub = Client(server.url, batch=2, backoff=FAST).detections(["gate"], start="begin")
    seen = [next(sub).seq, next(sub).seq]
    server.stop()
    back = threading.Timer(0.5, server.start)
    back.start()
    seen += [next(sub).seq, next(sub).seq]  # waits for Redis, then reads after entry 1
    back.join()
    sub.close()
    assert seen == [0, 1, 2, 3] and sub.reconnects == 1
