"""``streamseg swap [--pipeline FILE | --redis URL] PATH``: make running services load a checkpoint.

Publishes a swap request on ``<prefix>:control`` and waits for the first
answer on ``<prefix>:control:status``. With ``--pipeline`` the Redis url,
password, TLS files, prefix and ``model.swap_token`` are the service's own
(those two sections alone are read: not the console's token, for one);
otherwise the token comes from ``$STREAMSEG_SWAP_TOKEN`` (never from the
command line, where other users of the machine could read it). Exit code 0
when a service switched, 1 when it refused the request or the checkpoint
(its reason is printed; the old model keeps running) or nobody answered in
time, 2 for bad usage or an unreachable Redis.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError
from streamseg.cli.redis_args import (
    add_redis_arguments,
    pipeline_section,
    redis_section,
    stream_prefix,
)

TOKEN_ENV = "STREAMSEG_SWAP_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("weights", help="checkpoint path, as the service sees it")
    add_redis_arguments(parser)
    parser.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for an answer (0: do not wait)"
    )
    parser.epilog = (
        f"the swap token is the --pipeline's model.swap_token, else ${TOKEN_ENV}; "
        "exit codes: 0 swapped, 1 refused or no answer, 2 bad usage or Redis unreachable"
    )


def run(args: argparse.Namespace) -> int:
    import redis

    from streamseg.publish.connect import redis_client
    from streamseg.redact import redact_text, redact_url
    from streamseg.runtime.hotswap import request_swap, status_key, wait_for_status
    from streamseg.segment.config import ModelConfig

    section = redis_section(args)  # --pipeline: its redis: section alone
    prefix = stream_prefix(args, section)
    token = os.environ.get(TOKEN_ENV) or None
    model = pipeline_section(args.pipeline, "model", ModelConfig) if args.pipeline else None
    if model is not None and model.swap_token is not None:
        token = model.swap_token.get_secret_value()
    weights = args.weights
    if os.path.exists(weights):
        weights = os.path.abspath(weights)  # the service may run in another folder
    try:
        client = redis_client(section, socket_timeout=max(section.socket_timeout, args.wait + 10))
        last = (
            client.xinfo_stream(status_key(prefix))["last-generated-id"]
            if client.exists(status_key(prefix))
            else "0-0"
        )
        request_id = request_swap(client, prefix, weights, token=token)
    except (redis.RedisError, ValueError) as exc:
        raise UsageError(
            f"cannot reach Redis at {redact_url(section.url)}: {redact_text(str(exc))}"
        ) from None
    if args.wait <= 0:
        print(json.dumps({"id": request_id, "weights": weights, "sent": True}))
        return EXIT_OK
    status = wait_for_status(client, prefix, request_id, after=last, timeout_s=args.wait)
    if status is None:
        print(
            f"streamseg: no running service answered within {args.wait:g}s; is `serve` running "
            f"with hot swap on, on this Redis, with prefix {prefix!r}?",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    print(json.dumps(status))
    if not status.get("ok"):
        print(f"streamseg: the service kept its old model: {status.get('error')}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK
