"""``streamseg bench dispatch``: a batch's GPU launches and host syncs, counted on a CPU.

Runs one ``Segmenter.segment`` of the CUDA code path on an emulated GPU
(:mod:`streamseg.bench.emulated`): with the Triton kernels (``triton``) and
with the PyTorch reference ops (``reference``), and prints one JSON object:
per path ``ops_per_frame`` (torch ops dispatched), ``kernel_launches_per_frame``
(Triton launches included), ``host_syncs_per_frame`` (and each per batch, by
stage, and where each sync is made). ``--detections`` D sets how many
detections survive per frame (Mask2Former: queries kept). See
``docs/performance.md`` for what is counted and the budgets CI holds.

Exit codes: 0 done, 1 the count failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from streamseg.models import ARCHITECTURES

    parser.add_argument("--arch", required=True, choices=sorted(ARCHITECTURES))
    parser.add_argument("--batch", type=int, default=1, help="frames per batch (default 1)")
    parser.add_argument(
        "--detections", type=int, default=10, help="detections per frame (default 10)"
    )
    parser.add_argument(
        "--size",
        default="160x160",
        help="frame HxW; the model's resize keeps it (default 160x160: counts do not "
        "depend on the size)",
    )
    parser.add_argument(
        "--paths",
        default="triton,reference",
        help="ops paths to count, comma-separated: triton, reference (default both)",
    )
    parser.add_argument(
        "--proposals", type=int, default=64, help="RPN proposals per image (Mask R-CNN)"
    )
    parser.add_argument(
        "--interpret",
        action="store_true",
        help="run the Triton kernels in Triton's interpreter (slow) instead of taking "
        "each op's result from its C++ twin",
    )
    parser.epilog = "exit codes: 0 done, 1 the count failed, 2 bad arguments"


def _size(text: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {text!r}: expected HxW, e.g. 160x160") from None
    if h < 32 or w < 32:
        raise UsageError(f"--size {text!r}: both sides must be at least 32")
    return h, w


def run(args: argparse.Namespace) -> int:
    # The Triton kernels run on the CPU only in Triton's interpreter, which
    # Triton reads when it is first imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ["TRITON_INTERPRET"] != "1":
        raise UsageError(
            "bench dispatch runs the Triton kernels interpreted: unset TRITON_INTERPRET"
        )
    from streamseg.bench.dispatch import PATHS, count_dispatch

    paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
    unknown = [p for p in paths if p not in PATHS]
    if not paths or unknown:
        raise UsageError(f"--paths {args.paths!r}: choose from {', '.join(PATHS)}")
    if args.batch < 1 or args.detections < 1 or args.proposals < 1:
        raise UsageError("--batch, --detections and --proposals must be >= 1")
    size = _size(args.size)
    try:
        report = count_dispatch(
            args.arch,
            batch=args.batch,
            detections=args.detections,
            size=size,
            paths=paths,
            proposals=args.proposals,
            interpret=args.interpret,
        )
    except Exception as exc:  # the count itself failed: say so in the JSON
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return EXIT_FAILURE
    print(json.dumps(report, indent=2))
    return EXIT_OK
