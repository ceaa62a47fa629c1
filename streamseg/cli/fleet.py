"""``streamseg fleet status PIPELINE``: the fleet's workers and cameras, from Redis.

Reads the fleet's keys (``streamseg.fleet.store``) under the pipeline's
``redis.stream_prefix`` and prints, as a table or ``--json``:

* workers: capacity, the cameras each serves, its last heartbeat;
* cameras: owner, state (as the owner last reported it: ``streaming``,
  ``connecting``...; ``unassigned`` when nobody holds the lease), the
  lease's epoch and since when it is held.

Exit codes: 0 printed, 1 Redis did not answer, 2 bad arguments or config.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from streamseg.cli import EXIT_FAILURE, EXIT_OK
from streamseg.cli.options import add_pipeline

__all__ = ["add_arguments", "format_status", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="fleet_command", metavar="WHAT", required=True)
    status = sub.add_parser("status", help="workers and cameras of the fleet")
    add_pipeline(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    import redis

    from streamseg.cli.redis_args import load_pipeline_or_exit
    from streamseg.fleet.store import FleetStore
    from streamseg.publish.connect import redis_client

    config = load_pipeline_or_exit(args.pipeline)
    store = FleetStore(redis_client(config.redis), prefix=config.redis.stream_prefix)
    try:
        snapshot = store.snapshot()
    except redis.RedisError as exc:
        print(f"streamseg: error: Redis: {type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    print(json.dumps(snapshot, indent=2) if args.json else format_status(snapshot))
    return EXIT_OK


def format_status(snapshot: dict[str, Any], now: float | None = None) -> str:
    """The snapshot as two plain-text tables (workers, cameras)."""
    now = time.time() if now is None else now
    lines = [f"{'WORKER':<24} {'CAPACITY':>8} {'CAMERAS':>7}  LAST BEAT  SERVES"]
    for name, w in sorted(snapshot["workers"].items()):
        ago = f"{now - w['last_beat']:.1f}s ago"
        cams = ", ".join(w["cameras"]) or "-"
        lines.append(f"{name:<24} {w['capacity']:>8} {len(w['cameras']):>7}  {ago:<9}  {cams}")
    if not snapshot["workers"]:
        lines.append("(no live worker)")
    lines += ["", f"{'CAMERA':<24} {'OWNER':<24} {'STATE':<12} {'EPOCH':>5}  SINCE"]
    for cid, c in sorted(snapshot["cameras"].items()):
        since = "-" if c["since"] is None else time.strftime("%H:%M:%S", time.localtime(c["since"]))
        epoch = "-" if c["epoch"] is None else str(c["epoch"])
        lines.append(f"{cid:<24} {c['owner'] or '-':<24} {c['state']:<12} {epoch:>5}  {since}")
    if not snapshot["cameras"]:
        lines.append("(the fleet has no camera)")
    return "\n".join(lines)
