"""``streamseg bench pipeline PIPELINE``: end-to-end vs model-only frames/s, as JSON.

Uses the pipeline's model section (arch, weights, batch size, backend,
device) and its Redis (a temporary local redis-server when none answers).
The clip: ``--clip`` if given, else the pipeline's first file camera, else
``--frames`` frames of its first synthetic camera written to H.264.

Prints one JSON object: ``model_fps``, ``e2e_fps``, ``ratio`` (goal >= 0.9),
``latency_p50_ms``/``p90``/``p99`` (capture to Redis acknowledgement),
``peak_rss_mb``, the set-up, and ``live``: the pipeline's own cameras served
for ``--seconds`` (per camera ``camera_fps``, ``processed_fps``,
``realtime_ratio`` = processed / camera fps, ``dropped`` by reason and
glass-to-event latency percentiles). Exit codes: 0 done, 1 the run failed, 2 bad
arguments or config.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from streamseg.cli import EXIT_OK, UsageError

__all__ = ["add_arguments", "run"]

log = logging.getLogger("streamseg.bench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="path of a pipeline.yaml")
    parser.add_argument("--clip", help="a video file to use instead of the pipeline's cameras")
    parser.add_argument("--frames", type=int, default=96, help="frames of the clip to use")
    parser.add_argument("--warmup", type=int, default=2, help="untimed batches first")
    parser.add_argument("--cameras", type=int, default=1, help="file sources reading the clip")
    parser.add_argument(
        "--seconds",
        type=float,
        default=20.0,
        help="then serve the pipeline's own cameras this long and report each (0: skip)",
    )
    parser.add_argument(
        "--viewers",
        action="store_true",
        help="run the end-to-end clip again with a console viewer on every camera "
        "(drawing and encoding at http.live_fps) and report the throughput lost",
    )
    parser.add_argument("--log-level", default="WARNING")
    parser.epilog = "exit codes: 0 done, 1 run failed, 2 bad arguments or config"


def run(args: argparse.Namespace) -> int:
    from streamseg.config import ConfigError, load_pipeline
    from streamseg.runtime import bench
    from streamseg.runtime.factory import build_segmenter
    from streamseg.runtime.logs import setup_logging

    setup_logging(args.log_level)
    if args.frames < 1 or args.cameras < 1 or args.warmup < 0 or args.seconds < 0:
        raise UsageError("--frames and --cameras must be >= 1, --warmup and --seconds >= 0")
    try:
        config = load_pipeline(args.pipeline)
    except ConfigError as exc:
        raise UsageError(f"invalid pipeline:\n{exc.format()}") from None
    import torch

    torch.set_num_threads(config.runtime.inference_threads())
    with tempfile.TemporaryDirectory() as tmp:
        clip = _clip(config, args, Path(tmp))
        images = bench.decode_clip(clip, limit=args.frames)
        if not images:
            raise UsageError(f"{clip}: no frames could be decoded")
        if len(images) < args.frames:
            log.warning("bench: the clip has only %d frames", len(images))
        segmenter = build_segmenter(config.model)
        batch = config.model.batch_size
        for _ in range(args.warmup):
            bench.model_only_fps(segmenter, images[:batch], batch)
        model = bench.model_only_fps(segmenter, images, batch)
        with bench.redis_for_bench(config.redis) as redis:
            e2e_config = config.model_copy(update={"redis": redis})
            e2e = bench.run_end_to_end(e2e_config, segmenter, clip, cameras=args.cameras)
            watched = (
                bench.run_end_to_end(
                    e2e_config, segmenter, clip, cameras=args.cameras, viewers=True
                )
                if args.viewers
                else None
            )
            live = bench.run_live(e2e_config, segmenter, args.seconds) if args.seconds else None
        segmenter.close()
    extra = {
        "arch": config.model.arch,
        "device": config.model.device,
        "backend": config.model.backend,
        "precision": config.model.precision,
        "batch_size": batch,
        "frames": len(images),
        "cameras": args.cameras,
        "image_size": list(images[0].shape[:2]),
        "torch_threads": _threads(),
    }
    result = bench.summary(model, e2e, extra)
    if watched is not None:
        result["e2e_fps_with_viewers"] = round(watched.fps, 3)
        result["viewer_cost"] = round(1 - watched.fps / e2e.fps, 3) if e2e.fps > 0 else None
        result["viewer_frames"] = watched.rendered
    result["live"] = live
    print(json.dumps(result, indent=2))
    return EXIT_OK


def _clip(config, args: argparse.Namespace, tmp: Path) -> Path:  # type: ignore[no-untyped-def]
    from streamseg.runtime import bench

    if args.clip:
        if not Path(args.clip).is_file():
            raise UsageError(f"--clip: {args.clip} does not exist")
        return Path(args.clip)
    for cam in config.cameras:
        if "://" not in cam.url or cam.url.startswith("file://"):
            return Path(cam.url.removeprefix("file://"))
    for cam in config.cameras:
        if cam.url.startswith("synthetic://"):
            return bench.synthetic_clip(cam.url, args.frames, tmp)
    raise UsageError("the pipeline has no file or synthetic camera: pass --clip VIDEO")


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())
