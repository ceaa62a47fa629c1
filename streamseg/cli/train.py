"""``streamseg train CONFIG``: fine-tune a model on COCO datasets.

Multi-GPU / multi-node: ``torchrun --nproc_per_node=N -m streamseg train CONFIG``.
Prints a JSON summary on stdout when done; exit code 130 when stopped early
(Ctrl-C / SIGTERM save a resumable ``last.pth`` first).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from streamseg.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="training config (YAML), see docs/training.md")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in output.dir from its last.pth"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set solver.iterations=100 (repeatable)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )


def run(args: argparse.Namespace) -> int:
    from streamseg.config import ConfigError
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.train.config import load_train_config
    from streamseg.train.data import DatasetError
    from streamseg.train.trainer import TrainingError

    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    if args.threads is not None:
        import torch

        torch.set_num_threads(max(1, args.threads))
    try:
        cfg = load_train_config(args.config, args.overrides)
        from streamseg.train.engine import run_training

        result = run_training(cfg, resume=args.resume)
    except (ConfigError, DatasetError, CheckpointError) as exc:
        raise UsageError(str(exc)) from None
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    except TrainingError as exc:
        print(f"streamseg: training failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if rank == 0:
        summary = {
            "out_dir": str(result.out_dir),
            "iteration": result.iteration,
            "stopped": result.stopped,
            "best": result.best,
            "best_iteration": result.best_iteration,
            "eval": result.eval,
        }
        print(json.dumps(summary))
    return EXIT_INTERRUPTED if result.stopped else EXIT_OK
