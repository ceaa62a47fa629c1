"""Turning ``pipeline.yaml`` sections into the keyword arguments of each stage.

This is the one place that reads the config: each stage receives plain
keyword arguments (docs/architecture.md).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamseg.config.cameras import CameraConfig
from streamseg.config.model import ModelConfig
from streamseg.config.pipeline import PipelineConfig
from streamseg.config.redis import RedisConfig
from streamseg.ingest.url import redact_url
from streamseg.publish.publisher import RedisPublisher
from streamseg.publish.stage import PublishStage
from streamseg.runtime.protocols import SegmenterLike, SourceLike, TrackingStageLike

__all__ = [
    "build_clip_hook",
    "build_publish_stage",
    "build_segmenter",
    "build_swap_controller",
    "build_tracker",
    "open_camera",
    "redis_url_with_credentials",
    "source_options",
]

log = logging.getLogger("streamseg.runtime")

# clips.on_packet(camera_id, packet: av.Packet, stream: av.VideoStream)
PacketHook = Callable[[str, Any, Any], None]


def source_options(
    cam: CameraConfig, *, device: str = "cpu", on_packet: PacketHook | None = None
) -> dict[str, Any]:
    """Keyword arguments of ``streamseg.ingest.open_source`` for one camera."""
    r = cam.reconnect
    options: dict[str, Any] = {
        "camera_id": cam.id,
        "url": cam.url,
        "max_fps": cam.max_fps,
        "decode": cam.decode,
        "live": cam.live,
        "realtime": cam.realtime,
        "loop": cam.loop,
        "initial_backoff": r.initial_backoff,
        "max_backoff": r.max_backoff,
        "jitter": r.jitter,
        "connect_timeout": r.connect_timeout,
        "read_timeout": r.read_timeout,
        "device": device,
    }
    if on_packet is not None:
        options["on_packet"] = on_packet
    return options


def open_camera(
    cam: CameraConfig, *, device: str = "cpu", on_packet: PacketHook | None = None
) -> SourceLike:
    from streamseg.ingest import open_source  # type: ignore[attr-defined]

    log.info("ingest[%s]: %s", cam.id, redact_url(cam.url))
    source: SourceLike = open_source(**source_options(cam, device=device, on_packet=on_packet))
    return source


def resolve_weights(model: ModelConfig) -> str | None:
    """The checkpoint to load, or ``None`` for random weights (``missing_weights: random``)."""
    if model.weights is None:
        return None
    if Path(model.weights).exists():  # a file, or a Hugging Face model folder
        return model.weights
    if model.missing_weights == "random":
        log.warning(
            "model: %s does not exist; starting %s from RANDOM weights "
            "(missing_weights: random): detections are meaningless until a checkpoint is there",
            model.weights,
            model.arch,
        )
        return None
    raise FileNotFoundError(f"model weights not found: {model.weights}")


def build_segmenter(model: ModelConfig) -> SegmenterLike:
    from streamseg.segment import Segmenter  # type: ignore[attr-defined]

    options = model.segmenter_options(resolve_weights(model))
    log.info(
        "model: loading %s on %s (%s, %s)", model.arch, model.device, model.precision, model.backend
    )
    segmenter: SegmenterLike = Segmenter(**options)
    # The first batch's one-off costs (native kernels, a compiled backend's
    # first run) are paid here, before the cameras start and while /readyz
    # still says the model is loading.
    log.info("model: warm-up batch took %.1f s", segmenter.warm_up())
    return segmenter


def build_tracker(config: PipelineConfig, class_names: Sequence[str]) -> TrackingStageLike | None:
    """The tracking/alerts stage, or ``None`` when both sections are disabled."""
    if not (config.tracking.enabled or config.alerts.enabled):
        return None
    from streamseg.track.stage import build_tracking_stage

    stage: TrackingStageLike = build_tracking_stage(config.tracking, config.alerts, class_names)
    return stage


def redis_url_with_credentials(r: RedisConfig) -> str:
    """The redis url with ``username``/``password`` folded in (for clients that take a url)."""
    url = r.url
    if r.use_tls and url.startswith("redis://"):
        url = "rediss://" + url.removeprefix("redis://")
    if r.username is None and r.password is None:
        return url
    parts = urllib.parse.urlsplit(url)
    user = urllib.parse.quote(r.username or parts.username or "", safe="")
    pw = r.password.get_secret_value() if r.password is not None else (parts.password or "")
    host = parts.hostname or ""
    netloc = f"{user}:{urllib.parse.quote(pw, safe='')}@{host}" + (
        f":{parts.port}" if parts.port else ""
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def build_swap_controller(config: PipelineConfig) -> Any:
    """The hot-swap listener (``streamseg.runtime.hotswap``), or ``None`` when off."""
    m = config.model
    watch = m.weights if m.watch_weights else None
    if not m.hot_swap and watch is None:
        return None
    from streamseg.runtime.hotswap import SwapController

    url = redis_url_with_credentials(config.redis) if m.hot_swap else None
    return SwapController(redis_url=url, prefix=config.redis.stream_prefix, watch=watch).start()


def build_clip_hook(config: PipelineConfig) -> Any:
    """Clips around alerts (``streamseg.train.clips``), or ``None`` when off."""
    if not config.record.clips.enabled:
        return None
    from streamseg.train.clips import ClipHook

    return ClipHook(config=config.record)


def build_publish_stage(config: PipelineConfig, class_names: Sequence[str]) -> PublishStage:
    from streamseg.publish.connect import client_from_config

    r = config.redis
    secrets = [r.password.get_secret_value()] if r.password is not None else []
    publisher = RedisPublisher(
        client_factory=lambda: client_from_config(r),
        buffer_max=r.buffer_max_messages,
        max_batch=r.max_batch,
        reconnect_initial=r.reconnect_initial,
        reconnect_max=r.reconnect_max,
        secrets=secrets,
    )
    log.info(
        "publish: %s, streams %s:detections:<camera> and %s",
        redact_url(r.url),
        r.stream_prefix,
        r.alerts_stream,
    )
    return PublishStage(
        publisher=publisher,
        stream_prefix=r.stream_prefix,
        maxlen=r.maxlen,
        alerts_maxlen=r.alerts_maxlen,
        arch=config.model.arch,
        class_names=class_names,
    )
