"""Turning ``pipeline.yaml`` sections into the keyword arguments of each stage.

This is the one place that reads the config: each stage receives plain
keyword arguments (docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from streamseg.config.pipeline import PipelineConfig
from streamseg.ingest.base import PacketHook
from streamseg.ingest.config import CameraConfig
from streamseg.publish.encode import MessageEncoder
from streamseg.publish.sink import Message
from streamseg.redact import redact_url
from streamseg.runtime.protocols import (
    PassThrough,
    SegmenterLike,
    SourceLike,
    TrackingLike,
)
from streamseg.segment.config import ModelConfig
from streamseg.types import Event

if TYPE_CHECKING:
    from streamseg.console.live import LiveView
    from streamseg.runtime.pipeline import Pipeline
    from streamseg.telemetry.metrics import PipelineMetrics
    from streamseg.telemetry.tracing import FrameTracer

__all__ = [
    "build_clip_hook",
    "build_encoder",
    "build_pipeline",
    "build_swap_controller",
    "build_tracker",
    "check_rules_early",
    "decode_device",
    "known_class_names",
    "open_camera",
    "region_classes_of",
    "source_options",
]

log = logging.getLogger("streamseg.runtime")

# camera id -> fields added to its messages ({"worker", "epoch"} in a fleet)
Stamp = Callable[[str], Mapping[str, Any] | None]


def source_options(
    cam: CameraConfig, *, device: str = "cpu", on_packet: PacketHook | None = None
) -> dict[str, Any]:
    """Keyword arguments of ``streamseg.ingest.open_source`` for one camera."""
    options: dict[str, Any] = {
        "camera_id": cam.id,
        "url": cam.url,
        "max_fps": cam.max_fps,
        "decode": cam.decode,
        "live": cam.live,
        "realtime": cam.realtime,
        "loop": cam.loop,
        "connection": cam.reconnect.connection(),
        "device": device,
    }
    if on_packet is not None:
        options["on_packet"] = on_packet
    return options


def decode_device(config: PipelineConfig, cameras: Sequence[CameraConfig] | None = None) -> str:
    """Where cameras leave decoded frames: the model's device when a camera's decoder leaves
    them on a device (``DECODERS[...].on_device``: DALI).

    DALI decodes H.264 with NVDEC straight into GPU memory; PyAV cameras
    always decode on the CPU and ignore this.
    """
    from streamseg.ingest.spec import DECODERS

    cams = config.cameras if cameras is None else cameras
    return config.model.device if any(DECODERS[c.decode].on_device for c in cams) else "cpu"


def open_camera(
    cam: CameraConfig, *, device: str = "cpu", on_packet: PacketHook | None = None
) -> SourceLike:
    from streamseg.ingest import open_source

    log.info("ingest[%s]: %s", cam.id, redact_url(cam.url))
    source: SourceLike = open_source(**source_options(cam, device=device, on_packet=on_packet))
    return source


def known_class_names(model: ModelConfig) -> tuple[str, ...] | None:
    """The model's class names as far as the config, the weights catalogue or the
    checkpoint's meta say them, without building the model; ``None``: only
    the built model knows (random weights, a torchvision or detectron2 file)."""
    from streamseg.models.checkpoint import checkpoint_meta

    if model.class_names is not None:
        return tuple(model.class_names)
    if model.num_classes is not None:
        return None
    entry = model.catalogue_entry()
    names = entry.class_names() if entry is not None else None
    if names is not None:
        return tuple(names)
    path = model.weights_file()
    meta = checkpoint_meta(path) if path is not None else {}
    found = meta.get("class_names")
    return tuple(str(n) for n in found) if isinstance(found, list | tuple) else None


def check_rules_early(config: PipelineConfig) -> None:
    """Raise ``RuleError`` for an alert rule naming a class the model lacks,
    when its classes are known before it is built (:func:`known_class_names`):
    then no model process is started and no camera opened for nothing."""
    if not (config.tracking.enabled or config.alerts.enabled):
        return  # no rules are built (build_tracker)
    names = known_class_names(config.model)
    if names is not None:
        from streamseg.track.rules.engine import check_rule_classes

        check_rule_classes(config.alerts, names)


def build_tracker(
    config: PipelineConfig,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> TrackingLike:
    """The tracking/alerts stage, or ``PassThrough`` when both sections are disabled.

    Raises ``RuleError`` (naming the field) for a rule the model cannot run
    (``streamseg.track.rules.checks``; ``region_classes``: see
    :func:`region_classes_of`)."""
    if not (config.tracking.enabled or config.alerts.enabled):
        return PassThrough()
    from streamseg.track.stage import build_tracking_stage

    stage: TrackingLike = build_tracking_stage(
        config.tracking, config.alerts, class_names, region_classes
    )
    return stage


def region_classes_of(segmenter: SegmenterLike) -> tuple[str, ...] | None:
    """The classes ``segmenter``'s model gives as regions (``Segmenter.region_classes``);
    ``None`` when it does not say (a benchmark's stand-in)."""
    found = getattr(segmenter, "region_classes", None)
    return None if found is None else tuple(found)


def build_swap_controller(
    config: PipelineConfig, *, on_refused: Callable[[str], None] | None = None
) -> Any:
    """The hot-swap listener (``streamseg.runtime.hotswap``), or ``None`` when off."""
    m = config.model
    watch = m.weights_file() if m.watch_weights else None
    if not m.hot_swap and watch is None:
        return None
    from streamseg.publish.connect import redis_client
    from streamseg.runtime.hotswap import SwapController

    r = config.redis
    poll_s = 1.0
    return SwapController(
        # XREAD blocks for poll_s: the socket must wait longer than that.
        client_factory=(lambda: redis_client(r, socket_timeout=r.socket_timeout + poll_s))
        if m.hot_swap
        else None,
        prefix=r.stream_prefix,
        watch=watch,
        poll_s=poll_s,
        token=m.swap_token.get_secret_value() if m.swap_token is not None else None,
        on_refused=on_refused,
    ).start()


def build_clip_hook(config: PipelineConfig, *, meter: Any = None) -> Any:
    """Clips around alerts (``streamseg.record.clips``), or ``None`` when off; its
    metrics (``streamseg.record.metrics``) go on ``meter`` when one is given."""
    if not config.record.clips.enabled:
        return None
    from streamseg.record.clips import ClipHook
    from streamseg.record.metrics import observe_recording

    hook = ClipHook(config=config.record)
    if meter is not None:
        observe_recording(meter, hook.health)
    return hook


def build_encoder(
    config: PipelineConfig, class_names: Sequence[str], *, stamp: Stamp | None = None
) -> MessageEncoder:
    """The messages' encoder; the sinks come from ``streamseg.publish.sinks.build_sinks``.
    ``stamp``: a fleet worker's ``{"worker", "epoch"}`` of each camera's messages."""
    return MessageEncoder(arch=config.model.arch, class_names=class_names, stamp=stamp)


def build_pipeline(
    config: PipelineConfig,
    *,
    segmenter: SegmenterLike,
    sources: dict[str, SourceLike],
    metrics: PipelineMetrics | None = None,
    tracer: FrameTracer | None = None,
    between_batches: Callable[[SegmenterLike], object] | None = None,
    on_events: Callable[[list[Event]], None] | None = None,
    tap: LiveView | None = None,
    tracker: TrackingLike | None = None,
    stamp: Stamp | None = None,
    fence: Callable[[Message], bool] | None = None,
) -> Pipeline:
    """The pipeline of ``config`` on ``sources``: tracking, encoder, sinks, queues.

    ``serve`` (``Service``) and the benchmarks both build theirs here, so a
    benchmark measures exactly what ``serve`` runs; they differ only in the
    sources, the telemetry and the hooks passed in. ``tracker``: the
    tracking stage already built by ``build_tracker`` (``serve`` builds it
    before opening the cameras, so that a rule the model cannot run stops
    it first); by default it is built here. ``stamp`` / ``fence``: a fleet
    worker's (``streamseg.fleet.worker.FleetWorker.stamp`` / ``admits``): who
    publishes each camera, and whether a message may still be written.
    """
    from streamseg.publish.buffered import BufferedSink
    from streamseg.publish.sinks import build_sinks
    from streamseg.runtime.pipeline import Pipeline
    from streamseg.runtime.pipeline_parts import (
        PipelineHooks,
        PipelineLimits,
        PipelineStages,
        PipelineTelemetry,
    )

    class_names = tuple(segmenter.class_names)
    m, rt = config.model, config.runtime
    sinks = build_sinks(redis=config.redis, sinks=config.sinks)
    for sink in sinks:
        if fence is not None and isinstance(sink, BufferedSink):
            sink.fence = fence
    if tracker is None:
        tracker = build_tracker(config, class_names, region_classes_of(segmenter))
    return Pipeline(
        sources=sources,
        stages=PipelineStages(
            segmenter=segmenter,
            tracker=tracker,
            encoder=build_encoder(config, class_names, stamp=stamp),
            sinks=sinks,
        ),
        limits=PipelineLimits(
            batch_size=m.batch_size,
            max_wait=m.max_wait_ms / 1000,
            camera_queue=rt.camera_queue,
            results_queue=rt.results_queue,
            publish_queue=rt.publish_queue,
            drain_timeout=rt.drain_timeout,
            host_cpu=rt.pinned_cpu(),
        ),
        hooks=PipelineHooks(between_batches=between_batches, on_events=on_events, tap=tap),
        telemetry=PipelineTelemetry(metrics=metrics, tracer=tracer),
    )
