"""``streamseg subscribe``: print detections or alerts from Redis as JSON lines.

Reads ``<prefix>:detections:<camera>`` streams (the cameras given with
``--camera``, or every camera's stream found in Redis) and/or
``<prefix>:alerts`` (``--alerts``), one JSON message per line on stdout.
Without ``--group`` it tails new messages (``--from-start``: everything
still in the streams). With ``--group G --consumer C`` it reads as a member
of consumer group ``G`` (created if needed) and acknowledges each message
after printing it, so several subscribers share the work and a restarted
one resumes where it stopped. ``--pipeline FILE`` connects with the
service's own ``redis:`` section (password, TLS); see ``redis_args``.
The reading is ``streamseg.client``'s (``Client.entries``): when Redis goes
away while it runs, it reconnects with backoff and goes on where it was.

Exit codes: 0 after ``--count`` messages or on Ctrl-C; 1 when Redis cannot
be reached at start; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.redis_args import (
    add_redis_arguments,
    redis_failure,
    redis_section,
    stream_prefix,
)

if TYPE_CHECKING:
    from streamseg.client import Entry

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_redis_arguments(parser)
    parser.add_argument(
        "--camera", action="append", default=[], metavar="ID", help="a camera (repeatable)"
    )
    parser.add_argument("--alerts", action="store_true", help="read the alerts stream")
    parser.add_argument("--group", help="read as this consumer group (acknowledging messages)")
    parser.add_argument("--consumer", help="consumer name within --group (default: host-pid)")
    parser.add_argument("--count", type=int, help="exit after this many messages")
    parser.add_argument(
        "--from-start", action="store_true", help="begin at the oldest message kept, not new ones"
    )
    parser.add_argument(
        "--envelope",
        action="store_true",
        help='print {"stream", "id", "message"} objects instead of bare messages',
    )
    parser.add_argument(
        "--timeout", type=float, help="exit (code 0) after this many seconds without a message"
    )
    parser.epilog = (
        "exit codes: 0 done (--count reached, --timeout idle or Ctrl-C), "
        "1 Redis unreachable, 2 bad arguments"
    )


def run(args: argparse.Namespace) -> int:
    import redis

    from streamseg.client import Client
    from streamseg.redact import redact_text, redact_url

    if args.consumer and not args.group:
        raise UsageError("--consumer needs --group")
    if args.count is not None and args.count < 1:
        raise UsageError("--count must be >= 1")
    section = redis_section(args)
    client = Client(section, prefix=stream_prefix(args, section), block=0.5)
    try:
        client.ping()
    except redis.RedisError as exc:
        return redis_failure(redact_url(section.url), exc)
    # No --camera: every camera, unless --alerts alone asks for the alerts only.
    cameras = args.camera or ([] if args.alerts else None)
    entries = client.entries(
        cameras,
        alerts=args.alerts,
        start="begin" if args.from_start else "now",
        group=args.group,
        consumer=args.consumer,
        limit=args.count,
        idle_timeout=args.timeout,
    )
    try:
        for entry in entries:
            _print(entry, envelope=args.envelope)
    except KeyboardInterrupt:
        pass
    except redis.RedisError as exc:
        print(f"streamseg: Redis error: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        entries.close()
        client.close()
    return EXIT_OK


def _print(entry: Entry, *, envelope: bool) -> None:
    raw = entry.data if entry.data is not None else b"null"
    try:
        message = json.loads(raw)
    except ValueError:
        message = {"undecodable": raw.decode("utf-8", "replace")}
    if envelope:
        message = {"stream": entry.stream, "id": entry.id, "message": message}
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()
