"""``streamseg label --weights TEACHER --out DIR VIDEO...``: pseudo-label footage.

Writes ``DIR/annotations.json`` (COCO instances, RLE masks) and
``DIR/images/*.png``; train on it with a ``data.train`` entry
``{annotations: DIR/annotations.json}``. Prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from streamseg.cli import EXIT_OK, UsageError
from streamseg.cli.options import add_arch, add_device, add_precision

_VIDEO_SUFFIXES = {".mp4", ".mkv", ".mov", ".avi", ".ts", ".h264", ".webm"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", help="video files, or folders of them (e.g. record's)")
    parser.add_argument("--weights", required=True, help="teacher checkpoint")
    add_arch(parser, help="teacher architecture (non-streamseg files)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--score-threshold", type=float, default=0.5)
    sampling = parser.add_mutually_exclusive_group()
    sampling.add_argument("--every", type=int, default=1, help="label every N-th frame")
    sampling.add_argument("--fps", type=float, default=None, help="label F frames per second")
    parser.add_argument(
        "--min-track-frames",
        type=int,
        default=1,
        help="keep instances tracked over at least K sampled frames (1: off)",
    )
    parser.add_argument(
        "--tracking",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="tracker setting for --min-track-frames (a pipeline.yaml tracking: field), "
        "e.g. --tracking match_iou=0.1 (repeatable; see docs/training.md)",
    )
    parser.add_argument("--classes", default="", help="comma-separated teacher classes to keep")
    add_device(parser)
    add_precision(parser)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-frames", type=int, default=None, help="per video")


def _videos(inputs: list[str]) -> list[Path]:
    out: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.suffix.lower() in _VIDEO_SUFFIXES)
        elif path.is_file():
            out.append(path)
        else:
            raise UsageError(f"input {path} does not exist")
    if not out:
        raise UsageError(f"no video files found in {', '.join(inputs)}")
    return out


def _tracking(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> settings (values parsed as YAML: numbers, booleans)."""
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--tracking {item!r} must look like field=value")
        try:
            out[key.strip()] = YAML(typ="safe").load(io.StringIO(raw))
        except YAMLError as exc:
            raise UsageError(f"--tracking {item!r}: the value is not valid YAML ({exc})") from None
    return out


def run(args: argparse.Namespace) -> int:
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.segment.loading import load_model
    from streamseg.train.label import LabelOptions, label_tracking, label_videos

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.every < 1 or (args.fps is not None and args.fps <= 0):
        raise UsageError("--every must be >= 1 and --fps > 0")
    if args.min_track_frames < 1:
        raise UsageError("--min-track-frames must be >= 1")
    videos = _videos(args.inputs)
    options = LabelOptions(
        score_threshold=args.score_threshold,
        every=args.every,
        fps=args.fps,
        min_track_frames=args.min_track_frames,
        tracking=_tracking(args.tracking),
        classes=tuple(c.strip() for c in args.classes.split(",") if c.strip()),
        batch_size=args.batch_size,
        device=args.device,
        precision=args.precision,
        max_frames=args.max_frames,
    )
    try:
        label_tracking(options)  # a bad --tracking is reported before the teacher loads
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        teacher = {"score_threshold": args.score_threshold}
        model, class_names = load_model(args.arch, args.weights, teacher)
    except CheckpointError as exc:  # what serve says of the same file
        raise UsageError(f"--weights: {exc}") from None
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    model.to(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = label_videos(
            videos, model=model, class_names=class_names, out_dir=out, options=options
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(
        json.dumps(
            {
                "annotations": str(result.annotations),
                "images": result.images,
                "instances": result.instances,
                "dropped_unconfirmed": result.dropped_unconfirmed,
                "dropped_low_score": result.dropped_low_score,
                "videos": [str(v) for v in videos],
            }
        )
    )
    return EXIT_OK
