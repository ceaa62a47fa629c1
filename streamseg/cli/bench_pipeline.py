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
glass-to-event latency percentiles), ``cpu_ms_per_frame`` (CPU time per
stage, see ``streamseg.runtime.stats.STAGE_CPU``). Exit codes: 0 done, 1 the
run failed (the model raised, at warm-up or on a batch, or its process
ended: ``streamseg: error: bench pipeline failed: Type: message`` at once,
never a silent wait), 2 bad arguments or config.

``--model oracle`` replaces the model by the pipeline's first synthetic
camera's exact ground truth (``streamseg.bench.oracle``), so the run times
everything but the model: ``--width``/``--height``/``--objects`` reshape the
scene, ``--input h264`` (default) encodes ``--frames`` frames to H.264 and
decodes them on the CPU, ``--input memory`` hands the decoded frames over
from memory. It prints ``e2e_fps``, ``cpu_ms_per_frame``,
``host_ms_per_frame`` / ``host_fps_per_core`` (everything but decoding and
the model) and, for H.264, ``decode`` (one-thread PyAV decode frames/s per
core). ``--host-cpu`` overrides ``runtime.host_cpu`` (``host_cpu`` in the
JSON: the CPU the per-frame Python threads were pinned to, or ``null``).
``--task`` overrides ``model.task`` (Mask2Former: ``instance``, ``semantic``,
``panoptic``), so one pipeline compares the tasks' end-to-end costs
(``scripts/bench_tasks.py`` alternates them).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.options import add_pipeline
from streamseg.errors import StartupError
from streamseg.models import TASKS

__all__ = ["add_arguments", "run"]

log = logging.getLogger("streamseg.bench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pipeline(parser)
    parser.add_argument("--clip", help="a video file to use instead of the pipeline's cameras")
    parser.add_argument("--frames", type=int, default=96, help="frames of the clip to use")
    parser.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed model batches first, and one untimed end-to-end run (0: none)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="model-only and end-to-end runs, alternated; the figures are medians",
    )
    parser.add_argument("--cameras", type=int, default=1, help="file sources reading the clip")
    parser.add_argument(
        "--seconds",
        type=float,
        default=20.0,
        help="then serve the pipeline's own cameras this long and report each (0: skip)",
    )
    parser.add_argument(
        "--model",
        choices=("config", "oracle"),
        default="config",
        help="config: the pipeline's model; oracle: the synthetic scene's exact instances",
    )
    parser.add_argument(
        "--input",
        choices=("h264", "memory"),
        default="h264",
        help="oracle: frames decoded from an H.264 clip on the CPU, or from memory",
    )
    parser.add_argument("--width", type=int, help="oracle: scene width (default: the URL's)")
    parser.add_argument("--height", type=int, help="oracle: scene height (default: the URL's)")
    parser.add_argument("--objects", type=int, help="oracle: objects in the scene at a time")
    parser.add_argument(
        "--viewers",
        action="store_true",
        help="run the end-to-end clip again with a console viewer on every camera "
        "(drawing and encoding at http.live_fps) and report the throughput lost",
    )
    parser.add_argument(
        "--host-cpu",
        metavar="CPU",
        help="override runtime.host_cpu: a CPU number, last, or none",
    )
    parser.add_argument(
        "--task", choices=tuple(TASKS), help="override model.task (Mask2Former architectures)"
    )
    parser.add_argument("--log-level", default="WARNING")
    parser.epilog = "exit codes: 0 done, 1 run failed, 2 bad arguments or config"


def run(args: argparse.Namespace) -> int:
    from streamseg.cli.redis_args import load_pipeline_or_exit
    from streamseg.runtime.logs import setup_logging
    from streamseg.runtime.segmenting import describe_error

    setup_logging(args.log_level)
    if min(args.frames, args.cameras, args.repeat) < 1 or args.warmup < 0 or args.seconds < 0:
        raise UsageError(
            "--frames, --cameras and --repeat must be >= 1, --warmup and --seconds >= 0"
        )
    config = load_pipeline_or_exit(args.pipeline)
    if args.host_cpu is not None:
        config = _with_host_cpu(config, args.host_cpu)
    if args.task is not None:
        config = _with_task(config, args.task)
    problem = config.runtime.host_cpu_problem()  # the file's or --host-cpu's
    if problem is not None:
        raise UsageError(f"runtime.host_cpu: {problem[0]}; {problem[1]}")
    import torch

    from streamseg.hosting.memory import keep_heap_memory

    keep_heap_memory()  # as serve does
    torch.set_num_threads(config.runtime.inference_threads())
    try:
        if args.model == "oracle":
            with tempfile.TemporaryDirectory() as tmp:
                result = _run_oracle(config, args, Path(tmp))
        else:
            result = _run_model(config, args)
    except (UsageError, StartupError, KeyboardInterrupt):
        raise
    except Exception as exc:
        log.debug("bench pipeline failed", exc_info=exc)
        print(f"streamseg: error: bench pipeline failed: {describe_error(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    print(json.dumps(result, indent=2))
    return EXIT_OK


def _run_model(config, args: argparse.Namespace) -> dict:
    """The figures of the pipeline's own model (``--model config``)."""
    from streamseg.bench import clips, redis_server, report, runs
    from streamseg.bench.live import run_live
    from streamseg.hosting.build import build_model_stage

    with tempfile.TemporaryDirectory() as tmp:
        clip = _clip(config, args, Path(tmp))
        images = clips.decode_clip(clip, limit=args.frames)
        if not images:
            raise UsageError(f"{clip}: no frames could be decoded")
        if len(images) < args.frames:
            log.warning("bench: the clip has only %d frames", len(images))
        segmenter = build_model_stage(config)
        try:
            batch, device = config.model.batch_size, config.model.device
            for _ in range(args.warmup):
                runs.model_only_fps(segmenter, images[:batch], batch, device=device)
            with redis_server.redis_for_bench(config.redis) as redis:
                e2e_config = config.model_copy(update={"redis": redis})
                if args.warmup:  # one-off costs (imports, kernels loaded, connections) untimed
                    runs.run_end_to_end(e2e_config, segmenter, clip, cameras=args.cameras)
                # Alternated, so that each pair shares the machine's state of the moment.
                rounds = []
                for _ in range(args.repeat):
                    model = runs.model_only_fps(segmenter, images, batch, device=device)
                    e2e = runs.run_end_to_end(e2e_config, segmenter, clip, cameras=args.cameras)
                    rounds.append((model, e2e))
                watched = (
                    runs.run_end_to_end(
                        e2e_config, segmenter, clip, cameras=args.cameras, viewers=True
                    )
                    if args.viewers
                    else None
                )
                live = run_live(e2e_config, segmenter, args.seconds) if args.seconds else None
        finally:
            segmenter.close()  # the model's own process, when it has one, ends here
    extra = {
        "arch": config.model.arch,
        "device": config.model.device,
        "backend": config.model.backend,
        "model_process": config.runtime.model_process,
        # The model's own process is not in peak_rss_mb (this process only).
        "model_process_peak_rss_mb": round(float(getattr(segmenter, "peak_rss_mb", 0.0)), 1)
        if config.runtime.model_process
        else None,
        "precision": config.model.precision,
        "task": config.model.task or "instance",
        "batch_size": batch,
        "frames": len(images),
        "cameras": args.cameras,
        "image_size": list(images[0].shape[:2]),
        "torch_threads": _threads(),
    }
    result = report.summary(rounds, extra)
    e2e = report.median_round(rounds)[1]
    if watched is not None:
        result["e2e_fps_with_viewers"] = round(watched.fps, 3)
        result["viewer_cost"] = round(1 - watched.fps / e2e.fps, 3) if e2e.fps > 0 else None
        result["viewer_frames"] = watched.rendered
    result["live"] = live
    return result


def _run_oracle(config, args: argparse.Namespace, tmp: Path) -> dict:
    from streamseg.bench import clips, redis_server, report, runs
    from streamseg.bench.oracle import FrameTruth, OracleSegmenter

    camera, scene = _oracle_scene(config, args)
    frames = min(args.frames, scene.num_frames or args.frames)
    images, truth = [], []
    for i in range(frames):
        shown = scene.frame(i)
        images.append(shown.image)
        truth.append(FrameTruth.of(shown.gt))
    cams = [f"bench{k}" for k in range(args.cameras)]
    warm = [f"warmup{k}" for k in range(args.cameras)] if args.warmup else []
    oracle = OracleSegmenter(truth=dict.fromkeys(cams + warm, truth), class_names=scene.class_names)
    extra = {
        "input": args.input,
        "frames": frames,
        "cameras": args.cameras,
        "image_size": [scene.height, scene.width],
        "scene_objects": scene.num_objects,
        "objects_per_frame": round(sum(len(t.crops) for t in truth) / frames, 2),
        "rules_per_camera": 0,
        "batch_size": config.model.batch_size,
        "host_cpu": config.runtime.pinned_cpu(),
    }
    config = _bench_alerts(config, camera, cams + warm, extra)
    decode = None
    with redis_server.redis_for_bench(config.redis) as redis:
        e2e_config = config.model_copy(update={"redis": redis})
        # One-off costs (native kernels loaded on first use, imports) out of the timed run.
        if warm:
            warm_frames = images[: args.warmup * config.model.batch_size]
            sources = {c: clips.MemorySource(c, warm_frames, scene.fps) for c in warm}
            runs.run_sources(e2e_config, oracle, sources)  # type: ignore[arg-type]
        if args.input == "h264":
            clip = clips.write_clip(images, tmp / "clip.mp4", scene.fps)
            images.clear()
            decode = clips.decode_fps_per_core(clip)
            e2e = runs.run_end_to_end(e2e_config, oracle, clip, cameras=args.cameras)
        else:
            sources = {c: clips.MemorySource(c, images, scene.fps) for c in cams}
            e2e = runs.run_sources(e2e_config, oracle, sources)  # type: ignore[arg-type]
    result = report.oracle_summary(e2e, extra)
    result["decode"] = decode
    return result


def _oracle_scene(config, args: argparse.Namespace):
    """The pipeline's first synthetic camera and its scene, reshaped by the options."""
    from streamseg.synthetic.scene import SyntheticScene

    if args.clip:
        raise UsageError("--model oracle needs a synthetic scene's ground truth: drop --clip")
    camera = next((c for c in config.cameras if c.url.startswith("synthetic://")), None)
    if camera is None:
        raise UsageError(
            "--model oracle needs a synthetic camera in the pipeline "
            "(e.g. url: synthetic://?width=1920&height=1080&objects=10)"
        )
    overrides = {
        key: value
        for key, value in (
            ("width", args.width),
            ("height", args.height),
            ("num_objects", args.objects),
        )
        if value is not None
    }
    try:
        scene = SyntheticScene.from_url(camera.url, **overrides)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--model oracle: camera {camera.id!r}: {exc}") from None
    if args.input == "h264" and (scene.width % 2 or scene.height % 2):
        raise UsageError(
            f"--input h264 needs an even frame size (H.264 in 4:2:0), got "
            f"{scene.width}x{scene.height}: pass an even --width/--height or --input memory"
        )
    return camera, scene


def _bench_alerts(config, camera, cams: list[str], extra: dict):
    """``config`` with ``camera``'s alert rules given to every benchmark camera."""
    rules = config.alerts.cameras.get(camera.id)
    if rules is None:
        return config
    extra["rules_per_camera"] = len(rules.rules)
    alerts = config.alerts.model_copy(update={"cameras": dict.fromkeys(cams, rules)})
    return config.model_copy(update={"alerts": alerts})


def _clip(config, args: argparse.Namespace, tmp: Path) -> Path:
    from streamseg.bench import clips

    if args.clip:
        if not Path(args.clip).is_file():
            raise UsageError(f"--clip: {args.clip} does not exist")
        return Path(args.clip)
    for cam in config.cameras:
        if "://" not in cam.url or cam.url.startswith("file://"):
            return Path(cam.url.removeprefix("file://"))
    for cam in config.cameras:
        if cam.url.startswith("synthetic://"):
            return clips.synthetic_clip(cam.url, args.frames, tmp)
    raise UsageError("the pipeline has no file or synthetic camera: pass --clip VIDEO")


def _with_task(config, task: str):
    """``config`` with ``model.task`` from ``--task`` (checked as the file's would be)."""
    from pydantic import ValidationError

    from streamseg.segment.config import ModelConfig

    try:
        model = ModelConfig.model_validate({**config.model.model_dump(), "task": task})
    except ValidationError as exc:
        raise UsageError(f"--task {task}: {exc.errors()[0]['msg']}") from None
    return config.model_copy(update={"model": model})


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def _with_host_cpu(config, value: str):
    """``config`` with ``runtime.host_cpu`` from ``--host-cpu`` (a value the file could hold)."""
    from pydantic import ValidationError

    from streamseg.config.runtime import RuntimeConfig

    chosen = None if value == "none" else value
    try:
        runtime = RuntimeConfig.model_validate(
            {**config.runtime.model_dump(), "host_cpu": _cpu_number(chosen)}
        )
    except ValidationError as exc:
        raise UsageError(f"--host-cpu {value}: {exc}") from None
    return config.model_copy(update={"runtime": runtime})


def _cpu_number(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value
