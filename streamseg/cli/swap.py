"""``streamseg swap --redis URL PATH``: make running services load a checkpoint.

Publishes a swap request on ``<prefix>:control`` and waits for the first
answer on ``<prefix>:control:status``. Exit code 0 when a service switched,
1 when it refused the checkpoint (its reason is printed; the old model keeps
running) or nobody answered in time, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("weights", help="checkpoint path, as the service sees it")
    parser.add_argument("--redis", required=True, help="Redis URL of the running service")
    parser.add_argument("--prefix", default="streamseg", help="the service's Redis key prefix")
    parser.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for an answer (0: do not wait)"
    )


def run(args: argparse.Namespace) -> int:
    import redis

    from streamseg.ingest.url import redact_text, redact_url
    from streamseg.runtime.hotswap import request_swap, status_key, wait_for_status

    weights = args.weights
    if os.path.exists(weights):
        weights = os.path.abspath(weights)  # the service may run in another folder
    try:
        client = redis.Redis.from_url(args.redis, socket_timeout=args.wait + 10)
        last = (
            client.xinfo_stream(status_key(args.prefix))["last-generated-id"]
            if client.exists(status_key(args.prefix))
            else "0-0"
        )
        request_id = request_swap(client, args.prefix, weights)
    except (redis.RedisError, ValueError) as exc:
        raise UsageError(
            f"cannot reach Redis at {redact_url(args.redis)}: {redact_text(str(exc))}"
        ) from None
    if args.wait <= 0:
        print(json.dumps({"id": request_id, "weights": weights, "sent": True}))
        return EXIT_OK
    status = wait_for_status(client, args.prefix, request_id, after=last, timeout_s=args.wait)
    if status is None:
        print(
            f"streamseg: no running service answered within {args.wait:g}s; is `serve` running "
            f"with hot swap on, on this Redis, with prefix {args.prefix!r}?",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    print(json.dumps(status))
    if not status.get("ok"):
        print(f"streamseg: the service kept its old model: {status.get('error')}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK
