"""``streamseg render CLIP``: a clip plus its detections to an MP4 with the console's overlays.

The detections are detections messages (docs/events.md) of one camera:
from a JSON-lines file (``--input FILE``, ``-`` for stdin; what ``streamseg
subscribe`` prints) or from that camera's Redis stream (``--redis [URL]
--camera ID``; URL default: the ``--pipeline``'s ``redis.url``). A message
is drawn on the clip's frame whose index (from 0, in decoding order) is its
``seq``: the numbering serve gives a file source's frames, so a clip that
serve read as ``file://`` gets its own detections back. With ``--pipeline``
the camera's zones and lines are drawn too, with their counts (the rules
are run over the recorded track ids). Prints a JSON summary on stdout.

Exit codes: 0 done; 1 Redis unreachable; 2 bad arguments, a missing or
unreadable clip, a malformed line (its number is named), an unknown camera.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamseg.cli import EXIT_OK, UsageError
from streamseg.cli.redis_args import (
    add_detections_source,
    load_pipeline_or_exit,
    open_recording,
    redis_failure,
)

if TYPE_CHECKING:
    from streamseg.client.recording import Recording
    from streamseg.config.pipeline import PipelineConfig
    from streamseg.track.stage import TrackingStage
    from streamseg.types import Instances

__all__ = ["add_arguments", "run"]

Messages = dict[int, tuple[str, dict[str, Any]]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("clip", metavar="CLIP", help="the video the detections were made from")
    add_detections_source(
        parser, redis_default="the --pipeline's redis.url, else redis://127.0.0.1:6379/0"
    )
    parser.add_argument("-o", "--output", required=True, metavar="OUT.mp4", help="the MP4 to write")
    parser.add_argument(
        "--camera", metavar="ID", help="the camera (needed when the source has several)"
    )
    parser.add_argument(
        "--pipeline",
        metavar="FILE",
        help="draw this pipeline.yaml's zones and lines of the camera, with counts "
        "(and connect to its Redis)",
    )
    parser.add_argument("--prefix", help="stream prefix (default: the pipeline's, else streamseg)")
    parser.add_argument(
        "--trail-length", type=int, default=16, metavar="N", help="past positions drawn per track"
    )
    parser.add_argument("--crf", type=int, default=20, help="H.264 quality, 0-51 (default 20)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.epilog = (
        "exit codes: 0 done, 1 Redis unreachable, 2 bad arguments, clip, detections or camera"
    )


def run(args: argparse.Namespace) -> int:
    import redis

    from streamseg.console.overlay import OverlayInfo
    from streamseg.console.render import ClipError, render_clip
    from streamseg.streams import RecordingError
    from streamseg.track.replay import class_names_of

    clip, output = Path(args.clip), Path(args.output)
    _check_paths(clip, output, args)
    config = load_pipeline_or_exit(args.pipeline) if args.pipeline else None
    recording = open_recording(args, config)
    try:
        recording.ping()
        camera, messages = _camera_messages(recording, args)
    except RecordingError as exc:
        raise UsageError(str(exc)) from None
    except redis.RedisError as exc:
        return redis_failure(recording.where, exc, doing="read")
    finally:
        recording.close()
    names = class_names_of(messages.values())
    alerts = config.alerts.cameras.get(camera) if config is not None else None
    stage = _rules_stage(config, camera, names, args.pipeline)
    overlay_at = _overlays(messages, stage, camera)
    info = OverlayInfo(class_names=names, alerts=alerts, status=camera)
    progress = not args.no_progress and sys.stderr.isatty()
    try:
        done = render_clip(
            clip,
            output,
            overlay_at=overlay_at,
            info=info,
            trail_length=args.trail_length,
            crf=args.crf,
            progress=progress,
        )
    except (ClipError, RecordingError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        if stage is not None:
            stage.close()
    beyond = sum(1 for seq in messages if seq < 0 or seq >= done.frames)
    summary = {
        "output": done.output,
        "camera": camera,
        "frames": done.frames,
        "frames_drawn": done.drawn,
        "messages": len(messages),
        "messages_outside_clip": beyond,
        "codec": done.codec,
        "size": [done.width, done.height],
        "fps": round(done.fps, 3),
        "seconds": done.seconds,
    }
    print(json.dumps(summary))
    if beyond:
        print(
            f"streamseg: warning: {beyond} detections messages have a seq outside the clip's "
            f"frames 0..{done.frames - 1} and were not drawn (another clip, or a looped source?)",
            file=sys.stderr,
        )
    return EXIT_OK


def _check_paths(clip: Path, output: Path, args: argparse.Namespace) -> None:
    if not clip.is_file():
        raise UsageError(f"CLIP {clip}: no such file")
    if args.input not in (None, "-") and not Path(args.input).is_file():
        raise UsageError(f"--input {args.input}: no such file")
    if not output.parent.is_dir():
        raise UsageError(f"--output {output}: the folder {output.parent} does not exist")
    if output.resolve() == clip.resolve():
        raise UsageError("--output must not be the clip itself")
    if args.trail_length < 0:
        raise UsageError("--trail-length must be >= 0")
    if not 0 <= args.crf <= 51:
        raise UsageError("--crf must be 0..51")


def _camera_messages(recording: Recording, args: argparse.Namespace) -> tuple[str, Messages]:
    """The camera to draw (``--camera``, or the recording's only one) and its messages."""
    camera: str | None = args.camera
    cameras = recording.cameras()
    if recording.is_redis:
        known = ", ".join(cameras) or "none"
        if camera is None and len(cameras) != 1:
            raise UsageError(f"--redis: pick a camera with --camera (streams in Redis: {known})")
        camera = camera or cameras[0]
        if camera not in cameras:
            raise UsageError(
                f"--camera {camera}: unknown camera; no stream {recording.stream(camera)} "
                f"in Redis at {recording.where} (cameras there: {known})"
            )
    else:
        path = args.input
        if not cameras:
            raise UsageError(f"--input {path}: no detections messages in the file")
        if camera is None and len(cameras) > 1:
            raise UsageError(
                f"--input {path} has detections of {len(cameras)} cameras "
                f"({', '.join(cameras)}): pick one with --camera"
            )
        camera = camera or cameras[0]
        if camera not in cameras:
            raise UsageError(
                f"--camera {camera}: unknown camera; {path} has detections of {', '.join(cameras)}"
            )
    return camera, _by_seq(recording.messages([camera]), camera)


def _by_seq(items: Iterable[tuple[str, dict[str, Any]]], camera: str) -> Messages:
    """The camera's messages by ``seq``; a repeated seq (a restarted source) keeps the last."""
    out: Messages = {}
    for where, msg in items:
        if str(msg["camera"]) != camera:
            continue
        try:
            seq = int(msg["seq"])
        except (TypeError, ValueError):
            raise UsageError(f"{where}: `seq` must be an integer, got {msg['seq']!r}") from None
        out[seq] = (where, msg)
    return out


def _rules_stage(
    config: PipelineConfig | None, camera: str, names: list[str], path: str
) -> TrackingStage | None:
    """A tracking stage running the camera's rules on the recorded ids (for the counts)."""
    if config is None or camera not in config.alerts.cameras:
        return None
    from streamseg.track.alerts import AlertsConfig
    from streamseg.track.stage import TrackingStage

    section = config.alerts.cameras[camera]
    # A class the recording never saw still names a valid rule: it just never counts.
    extra = sorted({c for rule in section.rules for c in rule.classes} - set(names))
    try:
        return TrackingStage(
            tracking=config.tracking.model_copy(update={"enabled": False}),
            alerts=AlertsConfig(cameras={camera: section}),
            class_names=[*names, *extra],
        )
    except ValueError as exc:
        raise UsageError(f"--pipeline {path}: alerts.cameras.{camera}: {exc}") from None


def _overlays(messages: Messages, stage: TrackingStage | None, camera: str) -> Any:
    from streamseg.track.replay import to_result

    def overlay_at(index: int) -> tuple[Instances, Mapping[str, Any]] | None:
        item = messages.get(index)
        if item is None:
            return None
        result = to_result(item[1], item[0], masks=True, ids=True)
        if stage is None:
            return result.instances, {}
        stage.process(result)
        return result.instances, stage.counts(camera)

    return overlay_at
