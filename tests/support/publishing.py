"""Frames and alerts published by the real encoder and the real Redis sink, for client tests."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from streamseg.ops.rle import mask_to_rle
from streamseg.publish.encode import MessageEncoder
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import build_sink
from streamseg.types import Event, Frame, FrameResult, Instances

NAMES = ("__background__", "person", "car")
HEIGHT, WIDTH = 24, 32

Item = tuple[FrameResult, list[Event]]


def frame_item(
    camera: str, seq: int, *, alert: bool = False, trace: dict[str, str] | None = None
) -> Item:
    """Frame ``seq`` of ``camera`` with two tracked instances whose masks are random
    (seeded by camera and seq); ``alert``: one ``enter`` alert on its first instance."""
    g = torch.Generator().manual_seed(seq * 1000 + sum(map(ord, camera)))
    masks = torch.rand((2, HEIGHT, WIDTH), generator=g) > 0.6
    inst = Instances(
        image_size=(HEIGHT, WIDTH),
        boxes=torch.tensor([[1.0, 2.0, 11.5, 20.25], [4.0, 0.0, 31.0, 9.75]]) + seq,
        scores=torch.tensor([0.875, 0.5]),
        labels=torch.tensor([1, 2]),
        masks=masks,
        track_ids=torch.tensor([seq % 7, -1]),
    )
    frame = Frame(
        camera,
        seq,
        seq / 10,
        time.time(),
        torch.zeros((0, 0, 3), dtype=torch.uint8),
        trace=trace or {},
    )
    events = []
    if alert:
        events.append(
            Event(
                rule="door", kind="enter", camera_id=camera, time=frame.capture_time,
                frame_seq=seq, track_id=seq % 7, label=1, label_name="person", zone="door",
                pts=frame.pts, box=(1.0, 2.0, 11.5, 20.25), score=0.875,
                mask_rle=mask_to_rle(masks[0]), extra={"n": seq},
                snapshot=f"/var/snapshots/{camera}-{seq}.jpg",
            )
        )  # fmt: skip
    return FrameResult(frame, inst), events


def frames(camera: str, seqs: Sequence[int], *, alerts: bool = False) -> list[Item]:
    return [frame_item(camera, s, alert=alerts) for s in seqs]


def publish(
    url: str, items: Sequence[Item], *, tracer: Any = None, prefix: str = "streamseg"
) -> None:
    """Encode ``items`` with ``MessageEncoder`` and write them with ``RedisStreamsSink``."""
    sink = build_sink(RedisConfig(url=url, stream_prefix=prefix))
    sink.start(tracer=tracer)
    try:
        sink.submit(MessageEncoder(arch="maskrcnn_small", class_names=NAMES).encode(items))
        assert sink.flush(10), "the sink did not deliver within 10 s"
    finally:
        assert sink.close() == 0
