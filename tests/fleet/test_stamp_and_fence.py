"""What the fleet adds to publishing: the worker and epoch in every message of a camera
(schema-valid), and a sink that drops a camera's messages once its lease is not safe."""

from __future__ import annotations

import json
import time

import jsonschema
import torch

from streamseg.publish.encode import MessageEncoder
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import build_sink
from streamseg.publish.sink import Message
from streamseg.schemas import load_schema
from streamseg.types import Event, Frame, FrameResult, Instances
from tests.support.servers import RedisServer

CLASS_NAMES = ("__background__", "person")


def item(camera: str) -> tuple[FrameResult, list[Event]]:
    frame = Frame(camera, 3, 0.3, time.time(), torch.zeros((8, 8, 3), dtype=torch.uint8))
    inst = Instances(
        image_size=(8, 8),
        boxes=torch.tensor([[1.0, 1.0, 4.0, 4.0]]),
        scores=torch.tensor([0.9]),
        labels=torch.tensor([1]),
    )
    event = Event(rule="door", kind="enter", camera_id=camera, time=frame.capture_time,
                  frame_seq=3, track_id=1, label=1, label_name="person", zone="door")  # fmt: skip
    return FrameResult(frame.without_image(), inst), [event]


def test_messages_carry_the_worker_and_epoch_of_their_camera() -> None:
    stamps = {"held": {"worker": "w1", "epoch": 4}}
    encoder = MessageEncoder(arch="maskrcnn_small", class_names=CLASS_NAMES, stamp=stamps.get)
    out = encoder.encode([item("held"), item("other")])
    by_kind = {(m.kind, m.camera): json.loads(m.data) for m in out}
    for kind, schema in (("detections", "detections"), ("alert", "alert")):
        mine, theirs = by_kind[(kind, "held")], by_kind[(kind, "other")]
        assert (mine["worker"], mine["epoch"]) == ("w1", 4)
        assert "worker" not in theirs and "epoch" not in theirs  # outside a fleet: absent
        jsonschema.validate(mine, load_schema(schema))
        jsonschema.validate(theirs, load_schema(schema))


def test_a_fenced_sink_drops_what_the_fence_refuses(redis_server: RedisServer) -> None:
    sink = build_sink(RedisConfig(url=redis_server.url, stream_prefix="t"))
    allowed = {"a"}
    sink.fence = lambda m: m.camera in allowed
    sink.start()
    try:
        batch = [Message("detections", cam, b'{"x":1}', published_time=time.time())
                 for cam in ("a", "b", "a")]  # fmt: skip
        sink.submit(batch)
        assert sink.flush(5)
        client = redis_server.client()
        assert client.xlen("t:detections:a") == 2
        assert client.exists("t:detections:b") == 0
        health = sink.health()
        assert (health.published, health.dropped) == (2, 1)
    finally:
        sink.close()
