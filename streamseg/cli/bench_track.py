"""``streamseg bench track``: tracking quality (MOTA, IDF1) and tracker + rules cost, as JSON.

Quality: synthetic scenes (exact identities) whose ground truth is turned
into detections with box noise, missed detections, occlusion-dependent
scores and low-score false positives; the tracks are scored with
py-motmetrics (a hypothesis matches at box IoU >= 0.5). The exact ground
truth is scored too, as the ceiling. Goal: IDF1 >= 0.9 on the noisy set.

Cost: ``TrackingStage.process`` per frame with N moving objects in a
1920x1080 frame, tracker only and tracker + six rules (two zones, two
lines, dwell, crowding). Goals: p50 at most 0.5 ms per frame at 100 objects
(0.3 ms for the tracker alone), 2.5 ms at 500. ``--load`` times each size
again with busy processes (the model) and busy threads (encoding, sinks)
beside it, as in ``serve``, and quiet again, both with frames paced at
``--load-fps`` (in ``serve`` the stage sleeps between a camera's frames, so
each starts on a fresh scheduler turn); goal: loaded p50 at most 1.3 times
quiet.

Prints one JSON object. Exit codes: 0 done, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any

from streamseg.cli import EXIT_OK, UsageError
from streamseg.models import archs_of

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    q = parser.add_argument_group("quality")
    q.add_argument("--seeds", type=int, default=5, help="synthetic scenes (seeds 1..N)")
    q.add_argument("--frames", type=int, default=300, help="frames per scene")
    q.add_argument("--objects", type=int, default=8, help="objects in view at a time")
    q.add_argument("--size", default="640x360", help="scene WIDTHxHEIGHT, pixels")
    q.add_argument("--fps", type=float, default=15.0)
    q.add_argument("--noise", type=float, default=0.05, help="box edge noise, fraction of size")
    q.add_argument("--drop", type=float, default=0.1, help="probability a detection is missed")
    q.add_argument(
        "--false-positives", type=float, default=0.5, help="spurious low-score boxes per frame"
    )
    q.add_argument("--match", choices=["box_iou", "mask_iou"], default="box_iou")
    q.add_argument(
        "--detector",
        choices=archs_of("maskrcnn"),
        help="also score tracks of this model's detections on the rendered frames "
        "(needs --weights; use the --size the model was trained at, e.g. 320x240 "
        "for models/demo_small.pth)",
    )
    q.add_argument("--weights", help="checkpoint for --detector")
    q.add_argument(
        "--detector-score",
        type=float,
        default=0.1,
        help="the model's score threshold; keep it at or below tracking's low_score "
        "so the second association round sees low-score detections",
    )
    c = parser.add_argument_group("cost")
    c.add_argument(
        "--cost-objects", default="10,100,500", help="objects per frame, comma-separated"
    )
    c.add_argument("--cost-frames", type=int, default=300, help="timed frames per size")
    c.add_argument(
        "--load",
        nargs="?",
        const="auto",
        metavar="PROCESSES,THREADS",
        help="also time each size loaded: PROCESSES busy processes (the model) and THREADS "
        "busy threads of this process (encoding, sinks) beside it; alone: one process per "
        "CPU and one thread",
    )
    c.add_argument(
        "--load-fps",
        type=float,
        default=30.0,
        help="with --load: frames handed over at this rate, quiet and loaded alike "
        "(the stage sleeps between frames in serve)",
    )
    c.add_argument(
        "--model-nice",
        type=int,
        default=None,
        metavar="STEPS",
        help="with --load: CPU priority steps the busy processes run below this one, as "
        "serve runs the model's process (default: runtime.model_nice's default; 0: same)",
    )
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.epilog = "prints one JSON object; exit codes: 0 done, 2 bad arguments"


def run(args: argparse.Namespace) -> int:
    from streamseg.track.config import TrackingConfig

    size = _size(args.size)
    counts = _counts(args.cost_objects)
    load = _load(args.load)
    if args.load_fps <= 0:
        raise UsageError("--load-fps must be > 0")
    if args.model_nice is None:
        from streamseg.config.runtime import RuntimeConfig

        args.model_nice = RuntimeConfig().model_nice
    if not 0 <= args.model_nice <= 19:
        raise UsageError("--model-nice must be 0 to 19")
    if args.seeds < 1 or args.frames < 2 or args.objects < 1 or args.cost_frames < 1:
        raise UsageError("--seeds, --objects, --cost-frames must be >= 1 and --frames >= 2")
    if not (0 <= args.drop < 1 and args.noise >= 0 and args.false_positives >= 0):
        raise UsageError("--drop must be in [0, 1), --noise and --false-positives >= 0")
    if args.detector and not args.weights:
        raise UsageError("--detector needs --weights (a checkpoint of that model)")
    settings = TrackingConfig(match=args.match)
    out: dict[str, Any] = {"benchmark": "track", "machine": _machine()}
    if not args.skip_quality:
        out["quality"] = _quality(args, settings, size)
    if not args.skip_cost:
        out["cost"] = _cost(counts, args.cost_frames, load, args.load_fps, args.model_nice)
    out["goals"] = _goals(out)
    print(json.dumps(out, indent=2))
    return EXIT_OK


def _quality(args: argparse.Namespace, settings: Any, size: tuple[int, int]) -> dict[str, Any]:
    from streamseg.bench import track as bench

    seeds = list(range(1, args.seeds + 1))
    common = {
        "settings": settings,
        "seeds": seeds,
        "frames": args.frames,
        "width": size[0],
        "height": size[1],
        "fps": args.fps,
        "objects": args.objects,
        "masks": args.match == "mask_iou",
    }
    start = time.perf_counter()

    def degrade(seed: int) -> bench.Degrade:
        return bench.Degrade(
            box_noise=args.noise, drop=args.drop, false_positives=args.false_positives, seed=seed
        )

    result: dict[str, Any] = {
        "setup": {
            "scenes": len(seeds),
            "frames_per_scene": args.frames,
            "objects": args.objects,
            "size": list(size),
            "fps": args.fps,
            "match": args.match,
            "box_noise": args.noise,
            "drop": args.drop,
            "false_positives_per_frame": args.false_positives,
            "match_iou_for_metrics": 0.5,
        },
        "noisy_gt": bench.quality(degrade=degrade, **common),
        "exact_gt": bench.quality(degrade=lambda seed: None, **common),
    }
    if args.detector:
        result[args.detector] = _detector_quality(args, common)
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def _detector_quality(args: argparse.Namespace, common: dict[str, Any]) -> dict[str, Any]:
    """MOT figures of tracks built on ``args.detector``'s detections of the rendered frames."""
    import torch

    from streamseg.bench import track as bench
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.segment import Segmenter
    from streamseg.types import FrameBatch, Instances

    if not 0.0 <= args.detector_score <= 1.0:
        raise UsageError("--detector-score must be in [0, 1]")
    try:
        segmenter = Segmenter(
            arch=args.detector, weights=args.weights, score_threshold=args.detector_score
        )
    except (CheckpointError, FileNotFoundError, ValueError) as exc:
        raise UsageError(f"--detector {args.detector} --weights {args.weights}: {exc}") from None
    seconds: list[float] = []

    def detect(frame: Any) -> Instances:
        start = time.perf_counter()
        with torch.inference_mode():
            (found,) = segmenter.segment(FrameBatch((frame,)))
        seconds.append(time.perf_counter() - start)
        return found

    try:
        figures = bench.quality(degrade=lambda seed: None, detector=detect, **common)
    finally:
        segmenter.close()
    figures["weights"] = os.path.basename(args.weights)
    figures["score_threshold"] = args.detector_score
    figures["model_ms_per_frame"] = round(1e3 * sum(seconds) / max(len(seconds), 1), 2)
    return figures


def _cost(
    counts: list[int], frames: int, load: tuple[int, int] | None, fps: float, nice: int
) -> list[dict[str, Any]]:
    from streamseg.bench import track as bench

    rows = []
    for n in counts:
        track = bench.cost(objects=n, frames=frames, rules=False)
        both = bench.cost(objects=n, frames=frames, rules=True)
        row: dict[str, Any] = {
            "objects": n,
            "track_ms_p50": track["ms_p50"],
            "track_ms_mean": track["ms_mean"],
            "track_cpu_ms_mean": track["cpu_ms_mean"],
            "track_rules_ms_p50": both["ms_p50"],
            "track_rules_ms_mean": both["ms_mean"],
            "track_rules_ms_p99": both["ms_p99"],
            "track_rules_cpu_ms_mean": both["cpu_ms_mean"],
            "rules": both["rules"],
            "events": both["events"],
            "frames": frames,
        }
        if load is not None:
            row["loaded"] = _loaded(n, frames, load, fps, nice)
        rows.append(row)
    return rows


def _loaded(n: int, frames: int, load: tuple[int, int], fps: float, nice: int) -> dict[str, Any]:
    """Quiet and loaded figures, both with frames paced at ``fps`` as a camera's arrive."""
    from streamseg.bench import track as bench

    out: dict[str, Any] = {"processes": load[0], "threads": load[1], "fps": fps, "nice": nice}
    for rules, name in ((False, "track"), (True, "track_rules")):
        quiet = bench.cost(objects=n, frames=frames, rules=rules, fps=fps)
        busy = bench.cost(objects=n, frames=frames, rules=rules, fps=fps, load=load, nice=nice)
        out[f"quiet_{name}_ms_p50"] = quiet["ms_p50"]
        out[f"loaded_{name}_ms_p50"] = busy["ms_p50"]
        out[f"loaded_{name}_ms_p99"] = busy["ms_p99"]
        out[f"quiet_{name}_cpu_ms_mean"] = quiet["cpu_ms_mean"]
        out[f"loaded_{name}_cpu_ms_mean"] = busy["cpu_ms_mean"]
        out[f"{name}_loaded_over_quiet_p50"] = round(busy["ms_p50"] / quiet["ms_p50"], 3)
    return out


def _goals(out: dict[str, Any]) -> dict[str, Any]:
    goals: dict[str, Any] = {}
    if "quality" in out:
        goals["idf1_noisy_gt_at_least_0.9"] = out["quality"]["noisy_gt"]["idf1"] >= 0.9
    limits = {100: 0.5, 500: 2.5}  # ms per frame, tracker + six rules, p50
    for row in out.get("cost", []):
        n = row["objects"]
        limit = limits.get(n)
        if limit is not None:
            goals[f"track_rules_p50_at_most_{limit}ms_at_{n}"] = row["track_rules_ms_p50"] <= limit
        if n == 100:
            goals["track_p50_at_most_0.3ms_at_100"] = row["track_ms_p50"] <= 0.3
        if "loaded" in row and n in limits:
            ratio = row["loaded"]["track_rules_loaded_over_quiet_p50"]
            goals[f"loaded_p50_at_most_1.3x_quiet_at_{n}"] = ratio <= 1.3
    return goals


def _machine() -> dict[str, Any]:
    import numpy
    import scipy

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "cpus": os.cpu_count(),
        "load_1min": None if load is None else round(load, 2),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
    }


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {text!r}: expected WIDTHxHEIGHT, e.g. 640x360") from None
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise UsageError(f"--size {text!r}: width and height must be 16..8192")
    return w, h


def _load(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    if text == "auto":
        return os.cpu_count() or 1, 1
    try:
        processes, threads = (int(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--load {text!r}: expected PROCESSES,THREADS, e.g. 2,1") from None
    if processes < 0 or threads < 0 or processes + threads == 0:
        raise UsageError("--load: PROCESSES and THREADS must be >= 0, not both 0")
    return processes, threads


def _counts(text: str) -> list[int]:
    try:
        counts = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"--cost-objects {text!r}: expected numbers like 10,100,500") from None
    if not counts or min(counts) < 1:
        raise UsageError("--cost-objects: at least one count, each >= 1")
    return counts
