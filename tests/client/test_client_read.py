"""``streamseg.client`` reads what the real encoder and Redis sink published (real redis-server)."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

from streamseg.client import Alert, Client, FrameDetections, MessageError, SchemaError, decode_rle
from streamseg.publish.encode import DETECTIONS_SCHEMA_VERSION
from tests.support.publishing import HEIGHT, NAMES, WIDTH, frame_item, frames, publish
from tests.support.servers import RedisServer, wait_blocked


def test_detections_typed_with_masks(redis_server: RedisServer) -> None:
    items = frames("gate", range(3)) + frames("dock", range(2))
    publish(redis_server.url, items)
    with Client(redis_server.url) as client:
        got = list(client.detections(start="begin", limit=5))
    assert sorted((f.camera, f.seq) for f in got) == [
        ("dock", 0), ("dock", 1), ("gate", 0), ("gate", 1), ("gate", 2),
    ]  # fmt: skip
    by_key = {(r.frame.camera_id, r.frame.seq): r for r, _ in items}
    for f in got:
        assert isinstance(f, FrameDetections) and len(f) == 2
        assert f.stream == f"streamseg:detections:{f.camera}" and f.id
        assert (f.height, f.width, f.arch) == (HEIGHT, WIDTH, "maskrcnn_small")
        assert f.pts == pytest.approx(f.seq / 10)
        a, b = f.instances
        assert a.box == (1.0 + f.seq, 2.0 + f.seq, 11.5 + f.seq, 20.25 + f.seq)
        assert (a.label, a.label_name, a.score, a.track_id) == (1, "person", 0.875, f.seq % 7)
        assert (b.label, b.label_name, b.track_id) == (2, "car", None)
        published = by_key[(f.camera, f.seq)].instances.masks.numpy()
        mask = a.mask()
        assert mask is not None and mask.dtype == np.bool_ and mask.shape == (HEIGHT, WIDTH)
        np.testing.assert_array_equal(mask, published[0])
        np.testing.assert_array_equal(f.masks(), published)


def test_masks_decode_only_when_asked(redis_server: RedisServer) -> None:
    publish(redis_server.url, frames("gate", [0]))
    with Client(redis_server.url) as client:
        (frame,) = client.detections(["gate"], start="begin", limit=1)
    # What a frame holds is the RLE text as published: no pixels until mask().
    rle = frame.instances[0].rle
    assert rle is not None and isinstance(rle["counts"], str) and rle["size"] == [HEIGHT, WIDTH]


def test_alerts_typed(redis_server: RedisServer) -> None:
    items = frames("gate", range(3), alerts=True)
    publish(redis_server.url, items)
    with Client(redis_server.url) as client:
        got = list(client.alerts(start="begin", limit=3))
    assert all(isinstance(a, Alert) for a in got)
    assert [(a.camera, a.frame_seq, a.kind, a.rule, a.zone) for a in got] == [
        ("gate", s, "enter", "door", "door") for s in range(3)
    ]
    for a, (result, _) in zip(got, items, strict=True):
        assert (a.track_id, a.label_name, a.box, a.extra) == (
            a.frame_seq % 7,
            "person",
            (1.0, 2.0, 11.5, 20.25),
            {"n": a.frame_seq},
        )
        assert a.stream == "streamseg:alerts" and a.traceparent is None
        assert a.snapshot == f"/var/snapshots/gate-{a.frame_seq}.jpg"
        np.testing.assert_array_equal(a.mask(), result.instances.masks[0].numpy())


def test_now_reads_only_what_comes_after(redis_server: RedisServer) -> None:
    publish(redis_server.url, frames("gate", range(2)))  # before: skipped from "now"
    got: list[int] = []
    client = Client(redis_server.url, block=0.2)
    sub = client.detections(["gate"], start="now", limit=3, idle_timeout=30)
    reader = threading.Thread(target=lambda: got.extend(f.seq for f in sub))
    reader.start()
    wait_blocked(redis_server, "xread")
    publish(redis_server.url, frames("gate", range(2, 5)))
    reader.join(30)
    assert got == [2, 3, 4]
    # From the beginning: everything the stream holds.
    assert [f.seq for f in client.detections(["gate"], start="begin", idle_timeout=0.5)] == [
        0, 1, 2, 3, 4,
    ]  # fmt: skip


def test_new_camera_found_and_read_from_its_start(redis_server: RedisServer) -> None:
    """``cameras=None`` follows every camera, including one that starts publishing later."""
    publish(redis_server.url, frames("gate", [0]))
    got: list[tuple[str, int]] = []
    sub = Client(redis_server.url, block=0.2).detections(start="now", limit=3, idle_timeout=30)
    reader = threading.Thread(target=lambda: got.extend((f.camera, f.seq) for f in sub))
    reader.start()
    wait_blocked(redis_server, "xread")
    publish(redis_server.url, frames("dock", range(3)))
    reader.join(30)
    assert got == [("dock", 0), ("dock", 1), ("dock", 2)]


def test_explicit_start_id(redis_server: RedisServer) -> None:
    publish(redis_server.url, frames("gate", range(4)))
    ids = [e[0].decode() for e in redis_server.client().xrange("streamseg:detections:gate")]
    with Client(redis_server.url) as client:
        got = client.detections(["gate"], start=ids[1], idle_timeout=0.3)
        assert [f.seq for f in got] == [2, 3]  # after that entry


def _xadd(server: RedisServer, stream: str, message: Any) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    server.client().xadd(stream, {"data": data})


def _valid_detections(seq: int) -> dict[str, Any]:
    return {
        "schema_version": DETECTIONS_SCHEMA_VERSION, "type": "detections", "camera": "gate",
        "seq": seq, "pts": None, "capture_time": 1.0, "camera_time": None,
        "published_time": 2.0, "image": {"height": 4, "width": 4},
        "model": {"arch": "a"}, "traceparent": None,
        "instances": [{"track_id": None, "label": 1, "label_name": NAMES[1], "score": 0.5,
                       "box": [0, 0, 1, 1], "mask": {"size": [4, 4], "counts": "0@0"}}],
    }  # fmt: skip


def test_debug_mode_rejects_malformed_message(redis_server: RedisServer) -> None:
    bad = _valid_detections(1)
    bad["instances"][0]["score"] = 1.5
    for msg in (_valid_detections(0), bad, _valid_detections(2)):
        _xadd(redis_server, "streamseg:detections:gate", msg)
    sub = Client(redis_server.url, validate=True).detections(["gate"], start="begin")
    assert next(sub).seq == 0
    with pytest.raises(SchemaError) as err:
        next(sub)
    text = str(err.value)
    assert "streamseg:detections:gate" in text and "detections.schema.json" in text
    assert "instances/0/score" in text and "1.5" in text
    assert next(sub).seq == 2  # the reader goes on after a bad message
    sub.close()


def test_messages_that_cannot_be_parsed(redis_server: RedisServer) -> None:
    """Without the debug mode a broken message is still a clear error, not a KeyError."""
    broken = _valid_detections(0)
    del broken["camera"]
    _xadd(redis_server, "streamseg:detections:gate", broken)
    _xadd(redis_server, "streamseg:detections:gate", b"{not json")
    _xadd(redis_server, "streamseg:detections:gate", _valid_detections(2))
    sub = Client(redis_server.url).detections(["gate"], start="begin")
    with pytest.raises(MessageError, match=r"missing field 'camera'.*validate=True"):
        next(sub)
    with pytest.raises(MessageError, match="'data' is not JSON"):
        next(sub)
    assert next(sub).seq == 2
    sub.close()


def test_decode_rle_equals_pycocotools() -> None:
    from pycocotools import mask as coco

    rng = np.random.default_rng(0)
    for shape in [(1, 1), (5, 7), (24, 32)]:
        m = np.asfortranarray(rng.random(shape) > 0.5)
        rle = coco.encode(m.astype(np.uint8))
        np.testing.assert_array_equal(decode_rle(rle), m)
        assert decode_rle({"size": list(shape), "counts": rle["counts"].decode()}).shape == shape
    with pytest.raises(ValueError, match="needs 4 pixels"):
        decode_rle({"size": [2, 2], "counts": [1, 1]})


def test_bad_arguments_are_clear() -> None:
    with pytest.raises(ValueError, match="redis url must start with"):
        Client("http://127.0.0.1:6379")
    client = Client("redis://127.0.0.1:1/0")
    with pytest.raises(ValueError, match="start must be 'now', 'begin' or a stream entry id"):
        client.alerts(start="yesterday")
    with pytest.raises(ValueError, match="consumer needs group"):
        client.alerts(consumer="c1")


def test_trace_context_of_frames_travels_in_alerts(redis_server: RedisServer) -> None:
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    publish(redis_server.url, [frame_item("gate", 0, alert=True, trace={"traceparent": tp})])
    with Client(redis_server.url, validate=True) as client:
        (alert,) = client.alerts(start="begin", limit=1)
        (frame,) = client.detections(start="begin", limit=1)
    assert alert.traceparent == tp and frame.traceparent == tp
