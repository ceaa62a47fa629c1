"""``streamseg check PIPELINE``: validate a pipeline.yaml without running it.

Prints every problem at once, one per line
(``pipeline.yaml:LINE: field.path: message (hint)``), and exits 2; prints a
short summary and exits 0 when the file is valid. Secrets are never printed.
"""

from __future__ import annotations

import argparse
import sys

from streamseg.cli import EXIT_OK, EXIT_USAGE

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="path of a pipeline.yaml")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    parser.epilog = "exit codes: 0 valid, 2 invalid (every error is listed)"


def run(args: argparse.Namespace) -> int:
    from streamseg.config import ConfigError, load_pipeline
    from streamseg.redact import redact_url

    try:
        config = load_pipeline(args.pipeline)
    except ConfigError as exc:
        n = len(exc.issues)
        print(exc.format(), file=sys.stderr)
        print(f"{args.pipeline}: {n} error{'s' if n != 1 else ''}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        m = config.model
        print(f"{args.pipeline}: OK")
        print(f"  model: {m.arch} on {m.device} ({m.precision}, {m.backend}), batch {m.batch_size}")
        for cam in config.cameras:
            print(f"  camera {cam.id}: {redact_url(cam.url)} (decode {cam.decode})")
        print(f"  redis: {redact_url(config.redis.url)} prefix {config.redis.stream_prefix!r}")
    return EXIT_OK
