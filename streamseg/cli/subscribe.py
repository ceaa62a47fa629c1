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

Exit codes: 0 after ``--count`` messages or on Ctrl-C; 1 when Redis cannot
be reached; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.redis_args import add_redis_arguments, redis_section, stream_prefix

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

    from streamseg.publish.connect import redis_client
    from streamseg.redact import redact_text, redact_url

    if args.consumer and not args.group:
        raise UsageError("--consumer needs --group")
    if args.count is not None and args.count < 1:
        raise UsageError("--count must be >= 1")
    section = redis_section(args)
    client = redis_client(section, socket_timeout=max(section.socket_timeout, 30.0))
    try:
        client.ping()
    except redis.RedisError as exc:
        print(
            f"streamseg: cannot reach Redis at {redact_url(section.url)}: {redact_text(str(exc))}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    reader = _Reader(client, args, stream_prefix(args, section))
    try:
        reader.loop()
    except KeyboardInterrupt:
        pass
    except redis.RedisError as exc:
        print(f"streamseg: Redis error: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


class _Reader:
    """Follows the chosen streams with XREAD or XREADGROUP."""

    def __init__(self, client: Any, args: argparse.Namespace, prefix: str) -> None:
        self.client, self.args = client, args
        self.pattern = f"{prefix}:detections:*"
        self.fixed = [f"{prefix}:detections:{c}" for c in args.camera]
        if args.alerts:
            self.fixed.append(f"{prefix}:alerts")
        self.discover = not args.camera and not args.alerts
        self.consumer = args.consumer or f"{os.uname().nodename}-{os.getpid()}"
        self.ids: dict[str, str] = {}
        self.printed = 0
        self._last_scan = 0.0
        self._started = False

    def loop(self) -> None:
        idle_since = time.monotonic()
        while self.args.count is None or self.printed < self.args.count:
            self._refresh_streams()
            got = self._read_once() if self.ids else 0
            if got:
                idle_since = time.monotonic()
            elif not self.ids:
                time.sleep(0.2)
            if self.args.timeout is not None and time.monotonic() - idle_since > self.args.timeout:
                return

    def _refresh_streams(self) -> None:
        names = list(self.fixed)
        now = time.monotonic()
        if self.discover and now - self._last_scan > 1.0:
            self._last_scan = now
            names += sorted(
                k.decode() for k in self.client.scan_iter(match=self.pattern, count=500)
            )
        start = "0" if self.args.from_start else "$"
        for name in names:
            if name in self.ids:
                continue
            if self.args.group:
                self._ensure_group(name, start)
                self.ids[name] = ">"
            elif self._started or start == "0":
                # A stream that appeared after start-up is read from its beginning.
                self.ids[name] = "0"
            else:
                self.ids[name] = self._last_id(name)
        self._started = True

    def _last_id(self, stream: str) -> str:
        """The newest entry id (``$`` resolved once, so no message falls between reads)."""
        last = self.client.xrevrange(stream, count=1)
        if not last:
            return "0-0"
        eid = last[0][0]
        return eid.decode() if isinstance(eid, bytes) else str(eid)

    def _ensure_group(self, stream: str, start: str) -> None:
        import redis

        try:
            self.client.xgroup_create(stream, self.args.group, id=start, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _read_once(self) -> int:
        left = None if self.args.count is None else self.args.count - self.printed
        if self.args.group:
            resp = self.client.xreadgroup(
                self.args.group, self.consumer, self.ids, count=left, block=500
            )
        else:
            resp = self.client.xread(self.ids, count=left, block=500)
        got = 0
        for stream, entries in resp or []:
            name = stream.decode() if isinstance(stream, bytes) else stream
            for entry_id, fields in entries:
                eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                self._print(name, eid, fields)
                got += 1
                if not self.args.group:
                    self.ids[name] = eid
                else:
                    self.client.xack(name, self.args.group, eid)
                if self.args.count is not None and self.printed >= self.args.count:
                    return got
        return got

    def _print(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        raw = fields.get(b"data", b"null")
        try:
            message = json.loads(raw)
        except ValueError:
            message = {"undecodable": raw.decode("utf-8", "replace")}
        if self.args.envelope:
            message = {"stream": stream, "id": entry_id, "message": message}
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()
        self.printed += 1
