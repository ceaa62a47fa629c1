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
from typing import Any

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.redis_args import add_detections_source

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", metavar="PIPELINE", help="pipeline.yaml with the rules to try")
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
    from streamseg.config import ConfigError, load_pipeline
    from streamseg.track.replay import RecordingError, replay

    try:
        config = load_pipeline(args.pipeline)
    except ConfigError as exc:
        raise UsageError(f"invalid pipeline:\n{exc.format()}") from None
    if args.input is not None:
        messages = _file_source(args)
    else:
        messages = _redis_source(args, config)
        if messages is None:
            return EXIT_FAILURE
    from streamseg.publish.encode import round_numbers

    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    out = sys.stdout
    try:
        for event in replay(
            messages,
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


def _file_source(args: argparse.Namespace) -> Any:
    import io

    from streamseg.track.replay import file_messages

    cameras = set(args.camera)
    text = sys.stdin.read() if args.input == "-" else None  # stdin can be read only once

    def messages() -> Any:
        if text is not None:
            items = file_messages("<stdin>", io.StringIO(text))
        else:
            items = file_messages(args.input)
        return ((w, m) for w, m in items if not cameras or m["camera"] in cameras)

    return messages


def _redis_source(args: argparse.Namespace, config: Any) -> Any:
    import redis

    from streamseg.cli.redis_args import redis_section
    from streamseg.publish.connect import redis_client
    from streamseg.redact import redact_text, redact_url
    from streamseg.track.replay import redis_cameras, redis_messages

    section = redis_section(argparse.Namespace(redis=args.redis or None), config)
    prefix = args.prefix or section.stream_prefix
    client = redis_client(section, socket_timeout=max(section.socket_timeout, 30.0))
    where = redact_url(section.url)
    try:
        client.ping()
        cameras = args.camera or redis_cameras(client, prefix)
    except redis.RedisError as exc:
        print(f"streamseg: cannot reach Redis at {where}: {redact_text(str(exc))}", file=sys.stderr)
        return None
    if not cameras:
        raise UsageError(f"no detections streams `{prefix}:detections:*` in Redis at {where}")
    return lambda: redis_messages(client, prefix, cameras)
