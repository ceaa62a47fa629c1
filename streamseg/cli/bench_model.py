"""``streamseg bench model``: latency and throughput of one model, as JSON.

Example::

    streamseg bench model --arch maskrcnn_small --size 360x640 --batch 1 --backend inductor

``--size HxW`` is the input the model runs at: frames are HxW and the
model's resize is set to ``min_size = min(H, W)``, ``max_size = max(H, W)``,
so they are not rescaled (only padded to the model's size divisibility;
``input_size`` in the report). ``--min-size`` / ``--max-size`` set the
resize instead (one given: the other is the model's own): then ``--size`` is
a camera's frame size and the model scales it as it would when serving.

Prints one JSON object: ``latency_ms`` (``p50``, ``p90``, ``mean``, ``min``
per batch), ``cpu_ms`` (CPU time of the process per batch, all threads),
``fps`` (frames per second over the timed batches),
``peak_rss_mb``, ``warmup_s`` (untimed first batches, compilation included),
``setup_s`` (building the model and backend), ``detections_per_frame`` and
the settings. ``--compare eager,inductor,aot`` times several backends in
turn on the same batches (fair on a shared, busy machine) and adds
``speedup_p50`` over the first. Exit codes: 0 done, 1 the run failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from streamseg.cli import EXIT_OK, UsageError
from streamseg.cli.options import add_arch, add_device, add_precision
from streamseg.segment.backends import BACKENDS

__all__ = ["add_arguments", "parse_size", "resize_options", "run"]


def parse_size(text: str) -> tuple[int, int]:
    """``"360x640"`` -> ``(360, 640)`` (height x width)."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size must be HEIGHTxWIDTH like 360x640, got {text!r}") from None
    if h < 16 or w < 16 or h > 8192 or w > 8192:
        raise UsageError(f"--size {text}: height and width must be within 16..8192")
    return (h, w)


def resize_options(
    size: tuple[int, int], min_size: int | None, max_size: int | None
) -> dict[str, int]:
    """The model's resize options: those that keep ``size`` as it is, unless one is given.

    Given ones are used as they are and the other stays the model's default.
    """
    if min_size is None and max_size is None:
        return {"min_size": min(size), "max_size": max(size)}
    if min_size is not None and (min_size < 1 or (max_size is not None and max_size < min_size)):
        raise UsageError(f"--min-size {min_size} / --max-size {max_size}: need 1 <= min <= max")
    options = {"min_size": min_size, "max_size": max_size}
    return {k: v for k, v in options.items() if v is not None}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_arch(parser, default="maskrcnn_small")
    parser.add_argument("--weights", help="checkpoint (default: random weights)")
    parser.add_argument(
        "--size",
        default="360x640",
        help="input size HEIGHTxWIDTH the model runs at (frames of this size, not rescaled)",
    )
    parser.add_argument(
        "--min-size",
        type=int,
        help="the model's resize (shorter side) instead of min(H, W); --size is the frame size",
    )
    parser.add_argument(
        "--max-size", type=int, help="the model's resize (longest side cap) instead of max(H, W)"
    )
    parser.add_argument("--batch", type=int, default=1, help="frames per forward pass")
    parser.add_argument("--backend", default="eager", choices=tuple(BACKENDS))
    parser.add_argument(
        "--compare",
        help="comma-separated backends timed in turn on the same batches, e.g. "
        "eager,inductor,aot (fair on a shared machine); the first is the baseline",
    )
    parser.add_argument("--aot-package", help="the .pt2 of `streamseg export` (--backend aot)")
    add_precision(parser)
    add_device(parser)
    parser.add_argument(
        "--frames",
        default="device",
        choices=("device", "host"),
        help="where the frames wait: on the model's device (model only), or in host memory "
        "so each timed batch includes the host-to-device copy serve pays for CPU-decoded "
        "cameras (the report says which)",
    )
    parser.add_argument("--channels-last", action="store_true", help="channels-last convs")
    parser.add_argument("--iters", type=int, default=20, help="timed batches")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches first")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--score-threshold", type=float, help="model score threshold (default: the model's)"
    )
    parser.epilog = "exit codes: 0 done, 1 run failed, 2 bad arguments"


def run(args: argparse.Namespace) -> int:
    import torch

    from streamseg.bench.model import bench_interleaved, bench_segmenter, synthetic_batches
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.segment import Segmenter

    size = parse_size(args.size)
    if args.batch < 1 or args.iters < 1 or args.warmup < 0:
        raise UsageError("--batch and --iters must be >= 1, --warmup >= 0")
    from streamseg.hosting.memory import keep_heap_memory

    keep_heap_memory()  # as serve does
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    options: dict[str, Any] = resize_options(size, args.min_size, args.max_size)
    if args.score_threshold is not None:
        options["score_threshold"] = args.score_threshold
    backends = [b.strip() for b in (args.compare or args.backend).split(",") if b.strip()]
    segmenters = {}
    started = time.perf_counter()
    for backend in backends:
        try:
            segmenters[backend] = Segmenter(
                arch=args.arch,
                weights=args.weights,
                device=args.device,
                precision=args.precision,
                backend=backend,
                channels_last=args.channels_last,
                aot_package=args.aot_package,
                **options,
            )
        except (ValueError, CheckpointError, RuntimeError) as exc:
            raise UsageError(str(exc)) from None
    setup_s = time.perf_counter() - started
    frames_device = args.device if args.frames == "device" else "cpu"
    batches = synthetic_batches(size, args.batch, min(args.iters, 8), device=frames_device)
    first = next(iter(segmenters.values()))
    if args.compare:
        result = bench_interleaved(segmenters, batches, iters=args.iters, warmup=args.warmup)
    else:
        result = bench_segmenter(first, batches, iters=args.iters, warmup=args.warmup)
    input_size = list(first.prepare(batches[0].images).images.shape[-2:])
    for segmenter in segmenters.values():
        segmenter.close()
    report = {
        "arch": args.arch,
        "backend": ",".join(backends),
        "precision": args.precision,
        "device": args.device,
        "frames": args.frames,
        "timed": (
            "model only (frames already on the device)"
            if args.frames == "device" or torch.device(args.device).type == "cpu"
            else "host-to-device copy of the uint8 frames + model"
        ),
        "channels_last": args.channels_last,
        "batch": args.batch,
        "size": list(size),
        "min_size": first.input_spec.min_size,
        "max_size": first.input_spec.max_size,
        "input_size": input_size,
        "iters": args.iters,
        "warmup": args.warmup,
        "weights": args.weights,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "setup_s": round(setup_s, 2),
        **result,
    }
    print(json.dumps(report, indent=2))
    return EXIT_OK
