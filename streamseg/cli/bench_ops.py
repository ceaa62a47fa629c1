"""``streamseg bench ops``: native kernels vs the PyTorch reference, as JSON.

Prints one JSON object: per op ``native_ms``, ``reference_ms`` (medians) and
``ratio`` (reference / native; goal >= 5), with the workload's parameters,
plus the thread count and how the native library loaded. Exit codes: 0 done,
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
    parser.epilog = "exit codes: 0 done, 1 native missing or wrong, 2 bad arguments"


def run(args: argparse.Namespace) -> int:
    import torch

    from streamseg.ops.bench import run_benchmarks

    if args.repeat < 1 or (args.threads is not None and args.threads < 1):
        raise UsageError("--repeat and --threads must be >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        report = run_benchmarks(repeat=args.repeat, quick=args.quick)
    except AssertionError as exc:
        print(json.dumps({"error": str(exc)}))
        return EXIT_FAILURE
    print(json.dumps(report, indent=2))
    return EXIT_OK if report["native"]["devices"] else EXIT_FAILURE
