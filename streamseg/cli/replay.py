"""``streamseg replay PIPELINE``: re-run tracking and alert rules over recorded detections.

Reads detections messages (docs/events.md) from a JSON-lines file
(``--input FILE``, ``-`` for stdin; what ``streamseg subscribe`` prints) or
from the Redis detections streams (``--redis [URL]``; default the
pipeline's ``redis:`` section), runs the pipeline's ``tracking:`` and
``alerts:`` sections over them, and prints every alert event it would have
produced as one JSON line (the alerts message, ``Event.to_dict()``). Edit
the zones and thresholds in the YAML and run it again: no cameras needed.

Exit codes: 0 done, 1 Redis unreachable, 2 bad arguments, config or
recording (the message says which file/line or stream entry).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

from streamseg.cli import EXIT_OK, UsageError
from streamseg.cli.options import add_pipeline
from streamseg.cli.redis_args import (
    add_detections_source,
    load_pipeline_or_exit,
    open_recording,
    redis_failure,
)

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pipeline(parser, "pipeline.yaml with the rules to try")
    add_detections_source(
        parser,
        redis_default="the pipeline's redis.url; its password and TLS files apply either way",
    )
    parser.add_argument("--prefix", help="stream prefix (default: the pipeline's stream_prefix)")
    parser.add_argument(
        "--camera", action="append", default=[], metavar="ID", help="only this camera (repeatable)"
    )
    parser.add_argument(
        "--recorded-ids",
        action="store_true",
        help="keep the recording's track ids (tracking off); default: track again",
    )
    parser.add_argument(
        "--no-masks", action="store_true", help="do not decode masks (faster; events carry none)"
    )
    parser.add_argument(
        "--summary", action="store_true", help="print event counts per rule and kind to stderr"
    )
    parser.epilog = "exit codes: 0 done, 1 Redis unreachable, 2 bad arguments, config or recording"


def run(args: argparse.Namespace) -> int:
    import redis

    from streamseg.publish.encode import round_numbers
    from streamseg.streams import RecordingError, detections_pattern
    from streamseg.track.replay import replay

    config = load_pipeline_or_exit(args.pipeline)
    recording = open_recording(args, config)
    cameras: list[str] | None = list(args.camera) or None
    if recording.is_redis:
        try:
            recording.ping()
            cameras = cameras or recording.cameras()
        except redis.RedisError as exc:
            return redis_failure(recording.where, exc)
        if not cameras:
            pattern = detections_pattern(str(recording.prefix))
            raise UsageError(f"no detections streams `{pattern}` in Redis at {recording.where}")

    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    out = sys.stdout
    try:
        for event in replay(
            lambda: recording.messages(cameras),
            tracking=config.tracking,
            alerts=config.alerts,
            masks=not args.no_masks,
            recorded_ids=args.recorded_ids,
        ):
            counts[(event.rule, event.kind)] += 1
            body = round_numbers(event.to_dict())  # as the service publishes it
            out.write(json.dumps(body, separators=(",", ":")) + "\n")
    except RecordingError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # a rule the recording's classes cannot satisfy
        raise UsageError(str(exc)) from None
    out.flush()
    if args.summary:
        summary = {f"{rule}/{kind}": n for (rule, kind), n in sorted(counts.items())}
        print(json.dumps({"events": sum(counts.values()), "by_rule": summary}), file=sys.stderr)
    return EXIT_OK
