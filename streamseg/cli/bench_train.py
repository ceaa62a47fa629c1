"""``streamseg bench train``: a training iteration's phases, timed, as JSON.

Example::

    streamseg bench train --arch maskrcnn_small --size 360x640 --batch 2 --iters 5

Prints one JSON object (:mod:`streamseg.bench.train`): per phase (``data``,
``forward``, ``backward``, ``optimizer``, ``total``) the median wall
milliseconds (``ms``) and CPU milliseconds (``cpu_ms``) per iteration,
``images_per_s``, ``peak_memory_mb`` (peak RSS on a CPU,
``max_memory_allocated`` on a GPU), the last iteration's losses and the
settings. ``--processes 2`` also runs two data-parallel processes (gloo, one
thread each) against one process with twice the accumulation and reports
the scaling efficiency (:mod:`streamseg.bench.train_ddp`). ``--count``
instead counts one iteration on the emulated GPU: torch ops, kernel
launches and host syncs per phase, with where each sync is made, and the
peak device memory (:mod:`streamseg.bench.train_count`).

Exit codes: 0 done, 1 the run failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.bench_model import parse_size
from streamseg.cli.options import add_arch, add_device, add_precision

if TYPE_CHECKING:
    from streamseg.bench.train import TrainBenchSpec

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_arch(parser, default="maskrcnn_small")
    parser.add_argument(
        "--size", default="360x640", help="model input HEIGHTxWIDTH (images resized to it)"
    )
    parser.add_argument("--batch", type=int, default=2, help="images per micro-batch")
    parser.add_argument("--accumulation", type=int, default=1, help="micro-batches per iteration")
    add_precision(parser)
    parser.add_argument("--channels-last", action="store_true", help="channels-last convs")
    parser.add_argument(
        "--freeze", type=int, default=0, help="model.freeze_backbone_stages (0: train all)"
    )
    parser.add_argument(
        "--roi-samples", type=int, help="model.roi_samples_per_image (default: the model's)"
    )
    parser.add_argument(
        "--data", help="a COCO JSON or synthetic:// URL (default: synthetic scenes of --size)"
    )
    add_device(parser)
    parser.add_argument("--iters", type=int, default=5, help="timed iterations")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations first")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--processes",
        type=int,
        choices=(1, 2),
        default=1,
        help="2: also time two data-parallel processes (gloo, one thread each) against one "
        "process with twice the accumulation",
    )
    parser.add_argument(
        "--count",
        action="store_true",
        help="count one iteration on the emulated GPU (ops, launches, host syncs) instead",
    )
    parser.add_argument(
        "--proposals", type=int, help="--count: RPN proposals kept per image in training"
    )
    parser.epilog = "exit codes: 0 done, 1 run failed, 2 bad arguments"


def _spec(args: argparse.Namespace) -> TrainBenchSpec:
    from streamseg.bench.train import TrainBenchSpec

    if min(args.batch, args.accumulation, args.iters) < 1 or args.warmup < 0 or args.freeze < 0:
        raise UsageError("--batch, --accumulation, --iters must be >= 1; --warmup, --freeze >= 0")
    if args.data and not args.data.startswith("synthetic://") and not os.path.exists(args.data):
        raise UsageError(f"--data {args.data}: no such file")
    return TrainBenchSpec(
        arch=args.arch,
        size=parse_size(args.size),
        batch=args.batch,
        accumulation=args.accumulation,
        precision=args.precision,
        channels_last=args.channels_last,
        freeze=args.freeze,
        roi_samples=args.roi_samples,
        data=args.data,
        device=args.device,
        iters=args.iters,
        warmup=args.warmup,
    )


def run(args: argparse.Namespace) -> int:
    if args.count:
        # The Triton kernels run on the CPU only in Triton's interpreter, which
        # Triton reads when it is first imported.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    spec = _spec(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        if args.count:
            from streamseg.bench.train_count import count_train

            report = count_train(spec, proposals=args.proposals)
        elif args.processes == 2:
            from streamseg.bench.train_ddp import bench_data_parallel

            report = bench_data_parallel(spec)
        else:
            from streamseg.bench.train import bench_train

            report = bench_train(spec)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # the run itself failed: say so in the JSON
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return EXIT_FAILURE
    print(json.dumps(report, indent=2))
    return EXIT_OK
