"""The ``streamseg`` command line.

Each command lives in its own module with two functions::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...   # the exit code

Modules are imported only when their command runs, so ``streamseg --help``
stays fast and importing one command never loads another's dependencies.

Exit codes scripts can rely on:

* 0: success;
* 1: the command ran and failed (e.g. a benchmark or training error);
* 2: bad usage or bad input (a config error, a missing file, any
  :class:`streamseg.errors.StartupError`): the message says what is wrong
  and how to fix it;
* 130: interrupted by the user.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from streamseg.errors import StartupError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# command -> (module, one-line help). ``bench`` has sub-commands of its own.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("streamseg.cli.serve", "run the pipeline described by a pipeline.yaml"),
    "check": ("streamseg.cli.check", "validate a pipeline.yaml and exit"),
    "subscribe": ("streamseg.cli.subscribe", "print detections or alerts from Redis as JSON lines"),
    "replay": ("streamseg.cli.replay", "re-run tracking and alert rules over recorded detections"),
    "render": ("streamseg.cli.render", "draw detections on a clip as the console does, to an MP4"),
    "record": ("streamseg.cli.record", "record raw camera footage in segments"),
    "label": ("streamseg.cli.label", "pseudo-label recorded footage with a teacher model"),
    "train": ("streamseg.cli.train", "fine-tune a model on COCO datasets"),
    "eval": ("streamseg.cli.eval", "box and mask AP of a checkpoint on a COCO dataset"),
    "export": ("streamseg.cli.export", "write an AOTInductor package of a model"),
    "synth": ("streamseg.cli.synth", "write a synthetic scene as video plus ground truth"),
    "swap": ("streamseg.cli.swap", "tell a running service to load a new checkpoint"),
    "weights": ("streamseg.cli.weights", "list, download and verify published checkpoints"),
    "fleet": ("streamseg.cli.fleet", "workers and cameras of a fleet (fleet: in pipeline.yaml)"),
}

BENCH_COMMANDS: dict[str, tuple[str, str]] = {
    "model": ("streamseg.cli.bench_model", "model latency and throughput"),
    "ops": ("streamseg.cli.bench_ops", "native kernels vs PyTorch reference"),
    "track": ("streamseg.cli.bench_track", "tracking quality (MOTA/IDF1) and cost"),
    "pipeline": ("streamseg.cli.bench_pipeline", "end-to-end vs model-only throughput"),
    "dispatch": ("streamseg.cli.bench_dispatch", "GPU launches and host syncs per frame, counted"),
    "train": ("streamseg.cli.bench_train", "a training iteration's phases, timed (or counted)"),
    "fleet": ("streamseg.cli.bench_fleet", "fleet failover: workers killed, stopped, cut off"),
}


class UsageError(Exception):
    """A user mistake: printed as one clear message, exit code 2."""


def _add_table(
    sub: argparse._SubParsersAction,
    table: dict[str, tuple[str, str]],
    argv: Sequence[str],
) -> None:
    for name, (module, help_) in table.items():
        parser = sub.add_parser(name, help=help_, description=help_)
        parser.set_defaults(_module=module)
        # Build the full argument list only for the command being run (or for
        # its --help): other command modules stay unimported.
        if name in argv:
            importlib.import_module(module).add_arguments(parser)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamseg",
        description="Streaming instance segmentation: cameras in, events on Redis Streams out.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_table(sub, COMMANDS, argv)
    bench = sub.add_parser("bench", help="benchmarks that print JSON", description="benchmarks")
    bench.set_defaults(_help=bench.print_help)
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="WHAT")
    _add_table(bench_sub, BENCH_COMMANDS, argv)
    parser.set_defaults(_help=parser.print_help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.version:
        from streamseg import __version__

        print(__version__)
        return EXIT_OK
    module = getattr(args, "_module", None)
    if module is None:
        args._help()
        return EXIT_USAGE
    try:
        return int(importlib.import_module(module).run(args) or 0)
    except UsageError as exc:
        print(f"streamseg: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StartupError as exc:
        print(f"streamseg: error: {exc.describe()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
