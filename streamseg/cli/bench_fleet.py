"""``streamseg bench fleet PIPELINE``: failover of a fleet of ``serve`` workers, as JSON.

Starts ``--workers`` (3) ``serve`` workers of PIPELINE on this machine, a
fleet (``fleet:`` added, ``--lease-s`` seconds) sharing the pipeline's
cameras through its Redis (a temporary local redis-server when none
answers), then kills one (SIGKILL), restarts it, stops another (SIGTERM),
restarts it, and cuts a third off from Redis and lets it back
(``streamseg.bench.fleet``). Prints one JSON object: per phase, the number of
cameras that moved, ``max_gap_s`` (event to the moved cameras' first message
from their new worker) against its goal (kill 10 s, term 3 s),
``stayed_lost`` (frames lost by the cameras that did not move: goal 0),
``duplicated`` and ``ok``; per camera of each phase ``moved``, ``from``,
``to``, ``gap_s``, ``silence_s``, ``lost``, ``duplicated``; ``two_at_once``
(messages of an older epoch after a newer one's: goal 0), and the CPU
seconds of the workers and of the bench. Exit codes: 0 done (whatever the
figures), 1 the run failed, 2 bad arguments or config.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.options import add_pipeline

__all__ = ["add_arguments", "run"]

log = logging.getLogger("streamseg.bench")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pipeline(parser)
    parser.add_argument("--workers", type=int, default=3, help="serve workers (at least 3)")
    parser.add_argument("--lease-s", type=float, default=4.0, help="the fleet's lease seconds")
    parser.add_argument(
        "--settle", type=float, default=4.0, help="seconds of steady serving after each phase"
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=300.0,
        help="seconds a worker may take to load its model and serve",
    )


def run(args: argparse.Namespace) -> int:
    from streamseg.bench.fleet import run_fleet
    from streamseg.cli.redis_args import load_pipeline_or_exit
    from streamseg.runtime.logs import setup_logging

    setup_logging("INFO")
    if args.workers < 3:
        raise UsageError("--workers: at least 3")
    config = load_pipeline_or_exit(args.pipeline)
    try:
        result = run_fleet(
            Path(args.pipeline).resolve(),
            config,
            workers=args.workers,
            lease_s=args.lease_s,
            settle=args.settle,
            start_timeout=args.start_timeout,
        )
    except RuntimeError as exc:
        log.error("%s", exc)
        return EXIT_FAILURE
    print(json.dumps(result, indent=2))
    return EXIT_OK
