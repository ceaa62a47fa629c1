"""``streamseg bench ops``: native kernels vs the PyTorch reference, as JSON.

Prints one JSON object: per op ``native_ms``, ``reference_ms`` (medians),
``native_samples``/``reference_samples`` (calls timed) and ``ratio``
(reference / native; goal >= 5), with the workload's parameters,
plus the thread count and how the native library loaded. Where torchvision
works (CUDA machines), ``torchvision_ms`` and ``torchvision_over_native``
too. ``--device cuda`` times the Triton kernels. Thresholded pastes may
differ on a fraction ``binary_paste_mismatch_allowed`` of pixels (as in the
tests); everything else must agree to float tolerance or exactly. Exit codes: 0 done,
1 the native kernels are missing or disagree with the reference, 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import json

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per op and path")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="small workloads (a smoke test)")
    parser.add_argument(
        "--device",
        default="cpu",
        help="cpu, cuda or cuda:N (on cuda the native path is the Triton kernels)",
    )
    parser.epilog = "exit codes: 0 done, 1 native missing or wrong, 2 bad arguments"


def run(args: argparse.Namespace) -> int:
    import torch

    from streamseg.bench.ops import run_benchmarks

    if args.repeat < 1 or (args.threads is not None and args.threads < 1):
        raise UsageError("--repeat and --threads must be >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        device = torch.device(args.device)
    except RuntimeError:
        raise UsageError(f"--device {args.device!r}: expected cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {args.device}: torch {torch.__version__} sees no CUDA GPU")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r}: expected cpu, cuda or cuda:N")
    try:
        report = run_benchmarks(repeat=args.repeat, quick=args.quick, device=str(device))
    except AssertionError as exc:
        print(json.dumps({"error": str(exc)}))
        return EXIT_FAILURE
    print(json.dumps(report, indent=2))
    return EXIT_OK if device.type in report["native"]["devices"] else EXIT_FAILURE
