"""``streamseg check PIPELINE``: validate a pipeline.yaml without running it.

Checks the file itself (every key, value and cross-reference), then what
``serve`` would meet while starting, short of opening a camera or Redis: the
GPU and backend the model asks for, video files and V4L2 devices, DALI, and
(unless ``--no-model``) the model itself: its weights, its AOT package and the
classes the alert rules name.

Prints every problem at once, of every layer (a file the schema refuses
still has its cross-references checked, ``streamseg.config.salvage``, and
start-up's checks made on the sections that are valid alone), one per line
(``pipeline.yaml:LINE: field.path: message (hint)``; the line is that of the
field, for the machine's and the model's problems too), and exits 2; prints
a short summary (the model, the cameras, every sink and where it writes)
and exits 0 when the file is valid. Secrets are never printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from streamseg.cli import EXIT_OK, EXIT_USAGE
from streamseg.cli.options import add_pipeline

if TYPE_CHECKING:
    from streamseg.config.pipeline import PipelineConfig
    from streamseg.configbase.errors import ConfigError, ConfigIssue

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pipeline(parser)
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
    from streamseg.config.loader import with_lines
    from streamseg.redact import redact_url

    try:
        config = load_pipeline(args.pipeline)
    except ConfigError as exc:
        # Start-up's checks still look at the sections that are valid alone.
        later = [i for i in _partial_issues(args.pipeline, args.no_model) if i.loc not in
                 {j.loc for j in exc.issues}]  # fmt: skip
        return _report(ConfigError(exc.filename, [*exc.issues, *with_lines(later, exc.filename)]))
    issues = environment_issues(config)
    if not args.no_model and not any(i.loc[:1] == ("model",) for i in issues):
        issues += model_issues(config.model, config.alerts)
    if issues:  # each with the line of its field, as the file's own errors
        return _report(ConfigError(args.pipeline, with_lines(issues, args.pipeline)))
    if not args.quiet:
        m = config.model
        print(f"{args.pipeline}: OK")
        print(f"  model: {m.arch} on {m.device} ({m.precision}, {m.backend}), batch {m.batch_size}")
        for cam in config.cameras:
            print(f"  camera {cam.id}: {redact_url(cam.url)} (decode {cam.decode})")
        for line in sink_lines(config):
            print(f"  {line}")
    return EXIT_OK


def _partial_issues(path: str, no_model: bool) -> list[ConfigIssue]:
    """What start-up would find in the sections of a refused file that are valid alone:
    the cameras' sources, the machine and (unless ``no_model``) the model and the
    classes of the valid rule sections (``streamseg.config.salvage.valid_parts``)."""
    from streamseg.cli.startup import machine_issues, model_issues
    from streamseg.config import ConfigError
    from streamseg.config.salvage import valid_parts
    from streamseg.ingest.checks import camera_issues

    try:
        parts = valid_parts(path)
    except ConfigError:
        return []  # the file itself cannot be read: that is said already
    issues = [issue for i, cam in parts.cameras for issue in camera_issues(cam, i)]
    if parts.model is None or parts.runtime is None:
        return issues
    machine = machine_issues(parts.model, parts.runtime)
    if not no_model and not any(i.loc[:1] == ("model",) for i in machine):
        machine += model_issues(parts.model, parts.alerts)
    return issues + machine


def sink_lines(config: PipelineConfig) -> list[str]:
    """One line per sink, where every message goes: ``sink NAME (TYPE): WHERE``, WHERE
    as each sink's config tells it (``SinkEntry.describe``; no secrets)."""
    out = [f"sink redis (redis): {config.redis.describe()}"]
    for s in config.sinks:
        where = s.describe()
        out.append(f"sink {s.name} ({s.type})" + (f": {where}" if where else ""))
    return out


def _report(exc: ConfigError) -> int:
    n = len(exc.issues)
    print(exc.format(), file=sys.stderr)
    print(f"{exc.filename}: {n} error{'s' if n != 1 else ''}", file=sys.stderr)
    return EXIT_USAGE
