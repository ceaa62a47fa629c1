"""One subscription for detections and alerts together (``Client.messages``): typed, in
the order they arrived, with consumer groups; against a real redis-server."""

from __future__ import annotations

import pytest

from streamseg.client import Alert, Client, FrameDetections
from tests.support.publishing import frame_item, publish
from tests.support.servers import RedisServer


def interleaved(n: int) -> list[tuple[str, int, str]]:
    """Publish frames of gate (each with an alert) and dock in turns, in one write;
    the order they went out: ``(kind, camera, seq)``."""
    out = []
    for seq in range(n):
        out += [("detections", "gate", seq), ("alert", "gate", seq), ("detections", "dock", seq)]
    return out


def seen(item: FrameDetections | Alert) -> tuple[str, str, int]:
    if isinstance(item, Alert):
        return ("alert", item.camera, item.frame_seq)
    return ("detections", item.camera, item.seq)


@pytest.mark.parametrize("batch", [100, 2])
def test_both_kinds_typed_in_the_order_they_arrived(redis_server: RedisServer, batch: int) -> None:
    items = []
    for seq in range(8):
        items += [frame_item("gate", seq, alert=True), frame_item("dock", seq)]
    publish(redis_server.url, items)  # one write: many entries share a millisecond
    client = Client(redis_server.url, batch=batch)
    got = [seen(m) for m in client.messages(start="begin", idle_timeout=0.5)]
    assert got == [(k, c, s) for k, c, s in interleaved(8)]
    # Only some cameras, or no alerts.
    only = [seen(m) for m in client.messages(["dock"], alerts=False, start="begin", limit=3)]
    assert only == [("detections", "dock", s) for s in range(3)]
    typed = list(client.messages(["gate"], start="begin", limit=2))
    assert isinstance(typed[0], FrameDetections) and isinstance(typed[1], Alert)
    assert typed[1].kind == "enter" and typed[1].track_id == typed[0].instances[0].track_id


def test_a_consumer_group_shares_both_streams(redis_server: RedisServer) -> None:
    items = [frame_item("gate", s, alert=True) for s in range(6)]
    publish(redis_server.url, items)
    client = Client(redis_server.url, batch=3)
    one = client.messages(start="begin", group="g", consumer="c1", auto_ack=False)
    first = [next(one) for _ in range(4)]
    one.ack(first[0])
    one.ack(first[1])  # an alert: ack takes either kind
    one.close()  # the other two never acknowledged
    two = client.messages(group="g", consumer="c2", idle_timeout=0.5)
    rest = [seen(m) for m in two]
    again = [seen(m) for m in client.messages(group="g", consumer="c1", idle_timeout=0.5)]
    expected = [("detections", "gate", s) if k == 0 else ("alert", "gate", s)
                for s in range(6) for k in (0, 1)]  # fmt: skip
    # c1 read three of each stream (batch 3): its four not acknowledged come back to it,
    # in arrival order; c2 got what no one had read; nothing twice, nothing lost.
    assert [seen(m) for m in first] == expected[:4]
    assert again == expected[2:6]
    assert rest == expected[6:]
    pending = redis_server.client().xpending("streamseg:alerts", "g")["pending"]
    assert pending == 0


def test_neither_kind_is_refused(redis_server: RedisServer) -> None:
    with pytest.raises(ValueError, match="nothing to read"):
        Client(redis_server.url).messages([], alerts=False)


def test_entries_choose_the_streams_as_messages_do(redis_server: RedisServer) -> None:
    items = []
    for seq in range(3):
        items += [frame_item("gate", seq, alert=True), frame_item("dock", seq)]
    publish(redis_server.url, items)
    client = Client(redis_server.url)

    def streams(cameras: list[str] | None, alerts: bool) -> tuple[list[str], list[str]]:
        typed = client.messages(cameras, alerts=alerts, start="begin", idle_timeout=0.5)
        raw = client.entries(cameras, alerts=alerts, start="begin", idle_timeout=0.5)
        return [m.stream for m in typed], [e.stream for e in raw]

    for cameras, alerts in ((None, True), (None, False), (["dock"], False), ([], True)):
        typed, raw = streams(cameras, alerts)
        assert typed == raw and typed, (cameras, alerts)
    assert set(streams(None, False)[1]) == {client.detections_stream(c) for c in ("gate", "dock")}
    assert set(streams([], True)[1]) == {client.alerts_stream}
    with pytest.raises(ValueError, match="nothing to read"):
        client.entries([], alerts=False)
