"""``streamseg check PIPELINE``: validate a pipeline.yaml without running it.

Checks the file itself (every key, value and cross-reference), then what
``serve`` would meet while starting, short of opening a camera or Redis: the
GPU and backend the model asks for, video files and V4L2 devices, DALI, and
(unless ``--no-model``) the model itself: its weights, its AOT package and the
classes the alert rules name.

Prints every problem at once, one per line
(``pipeline.yaml[:LINE]: field.path: message (hint)``), and exits 2; prints a
short summary and exits 0 when the file is valid. Secrets are never printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from streamseg.cli import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from streamseg.config.errors import ConfigError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="path of a pipeline.yaml")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    parser.add_argument(
        "--no-model",
        action="store_true",
        help="do not load the model (skips the weights, AOT package and rule-class checks)",
    )
    parser.epilog = "exit codes: 0 valid, 2 invalid (every error is listed)"


def run(args: argparse.Namespace) -> int:
    from streamseg.cli.startup import environment_issues, model_issues
    from streamseg.config import ConfigError, load_pipeline
    from streamseg.redact import redact_url

    try:
        config = load_pipeline(args.pipeline)
    except ConfigError as exc:
        return _report(exc)
    issues = environment_issues(config)
    if not args.no_model and not any(i.loc[:1] == ("model",) for i in issues):
        issues += model_issues(config)
    if issues:
        return _report(ConfigError(args.pipeline, issues))
    if not args.quiet:
        m = config.model
        print(f"{args.pipeline}: OK")
        print(f"  model: {m.arch} on {m.device} ({m.precision}, {m.backend}), batch {m.batch_size}")
        for cam in config.cameras:
            print(f"  camera {cam.id}: {redact_url(cam.url)} (decode {cam.decode})")
        print(f"  redis: {redact_url(config.redis.url)} prefix {config.redis.stream_prefix!r}")
    return EXIT_OK


def _report(exc: ConfigError) -> int:
    n = len(exc.issues)
    print(exc.format(), file=sys.stderr)
    print(f"{exc.filename}: {n} error{'s' if n != 1 else ''}", file=sys.stderr)
    return EXIT_USAGE
