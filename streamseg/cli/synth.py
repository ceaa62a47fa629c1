"""``streamseg synth``: write a synthetic scene as video plus exact ground truth.

    streamseg synth --out DIR [--seed N] [--frames N] [--size HxW] [--fps F]
                    [--objects N] [--png] [--no-video] [--noise L] [--shake S]
                    [--shapes 5]                 # 5: hexagons too (a fifth class)
    streamseg synth --bench [--frames N] [--size HxW] ...   # rendering speed, no files

Prints one JSON object: what was written (or the timing figures).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

from streamseg.cli import UsageError

_SIZE = re.compile(r"\s*(\d+)\s*[xX]\s*(\d+)\s*")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="output folder (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="scene seed (default 0)")
    parser.add_argument("--frames", type=int, default=300, help="frames to write (default 300)")
    parser.add_argument(
        "--size", default="360x640", help="frame size HEIGHTxWIDTH in pixels (default 360x640)"
    )
    parser.add_argument("--fps", type=float, default=15.0, help="frames per second (default 15)")
    parser.add_argument(
        "--objects", type=int, default=6, help="random objects at a time (default 6)"
    )
    parser.add_argument("--png", action="store_true", help="also write frames/NNNNNN.png")
    parser.add_argument("--no-video", action="store_true", help="do not write scene.mp4")
    parser.add_argument("--noise", type=int, default=2, help="sensor noise levels 0..8 (default 2)")
    parser.add_argument(
        "--shake", type=float, default=0.0, help="camera shake, fraction of the frame 0..0.1"
    )
    parser.add_argument(
        "--shapes",
        type=int,
        default=4,
        help="object classes: 4 (disc, square, triangle, star; default) or 5 (adds hexagon)",
    )
    parser.add_argument("--crf", type=int, default=18, help="x264 quality (default 18)")
    parser.add_argument(
        "--bench",
        action="store_true",
        help="only measure rendering speed over --frames frames; print JSON, write nothing",
    )


def _size(text: str) -> tuple[int, int]:
    match = _SIZE.fullmatch(text)
    if match is None:
        raise UsageError(f"--size must be HEIGHTxWIDTH in pixels, e.g. 360x640; got {text!r}")
    return int(match.group(1)), int(match.group(2))


def _scene(args: argparse.Namespace) -> Any:
    from streamseg.synthetic.scene import SyntheticScene

    height, width = _size(args.size)
    if args.frames < 1:
        raise UsageError(f"--frames must be >= 1, got {args.frames}")
    try:
        return SyntheticScene(
            seed=args.seed,
            height=height,
            width=width,
            fps=args.fps,
            num_objects=args.objects,
            num_frames=args.frames,
            noise=args.noise,
            shake=args.shake,
            shapes=args.shapes,
        )
    except ValueError as exc:
        raise UsageError(
            f"{exc} (check --size, --fps, --objects, --noise, --shake, --shapes)"
        ) from None


def _bench(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    scene = _scene(args)
    setup_ms = 1000 * (time.perf_counter() - t0)
    times, objects = [], 0
    for index in range(args.frames):
        t0 = time.perf_counter()
        frame = scene.frame(index)
        times.append(1000 * (time.perf_counter() - t0))
        objects += len(frame.gt)
    ordered = sorted(times)
    return {
        "benchmark": "synth_render",
        "height": scene.height,
        "width": scene.width,
        "objects": scene.num_objects,
        "frames": args.frames,
        "gt_objects_per_frame": round(objects / args.frames, 2),
        "setup_ms": round(setup_ms, 2),
        "ms_per_frame_mean": round(statistics.fmean(times), 3),
        "ms_per_frame_p50": round(ordered[len(ordered) // 2], 3),
        "ms_per_frame_p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "frames_per_second": round(1000 * len(times) / sum(times), 1),
    }


def run(args: argparse.Namespace) -> int:
    if args.bench:
        print(json.dumps(_bench(args)))
        return 0
    if args.out is None:
        raise UsageError("--out DIR is required (or --bench to only time rendering)")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a folder")
    if not 0 <= args.crf <= 51:
        raise UsageError(f"--crf must be 0..51, got {args.crf}")
    from streamseg.synthetic.export import write_scene

    scene = _scene(args)
    video = not args.no_video
    if video and (scene.width % 2 or scene.height % 2):
        raise UsageError(
            f"--size {args.size}: H.264 needs an even height and width (or pass --no-video)"
        )
    summary = write_scene(
        scene, args.out, num_frames=args.frames, video=video, frames_png=args.png, crf=args.crf
    )
    print(json.dumps(summary))
    return 0
