"""``streamseg serve PIPELINE``: run the pipeline until stopped.

Exit codes: 0 after a clean stop (SIGINT/SIGTERM drained, or all file
sources done); 1 when a stage failed or draining timed out; 2 for a user
mistake met while starting: a bad pipeline.yaml, a GPU or backend this
machine does not have, a missing file or device, DALI not installed, weights
or an AOT package that do not fit, alert rules naming classes the model does
not have (the message names the field and the fix; ``streamseg check``
reports the same before starting), including catalogue weights that are not
downloaded (``--download`` fetches them first; a failed download exits 1);
130 on a second interrupt while draining.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING

from streamseg.cli import EXIT_FAILURE, UsageError
from streamseg.cli.options import add_pipeline

if TYPE_CHECKING:
    from streamseg.segment.config import ModelConfig

__all__ = ["add_arguments", "run"]

log = logging.getLogger("streamseg.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pipeline(parser)
    parser.add_argument(
        "--shard",
        default=os.environ.get("STREAMSEG_SHARD"),
        metavar="INDEX/COUNT",
        help="serve only this shard's cameras (stable hash of the camera id); "
        "INDEX may be a pod name ending in -N; default $STREAMSEG_SHARD",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument(
        "--no-status", action="store_true", help="no live status line even on a terminal"
    )
    parser.add_argument(
        "--download",
        action="store_true",
        help="when model.weights names a catalogue entry that is not cached, download it "
        "first (sha256-checked); without it serve stops and says how to fetch it",
    )
    parser.epilog = (
        "exit codes: 0 clean stop, 1 runtime failure, 2 bad config or model, 130 forced stop"
    )


def run(args: argparse.Namespace) -> int:
    from streamseg.cli.redis_args import load_pipeline_or_exit
    from streamseg.config import ConfigError
    from streamseg.config.shard import parse_shard, select_shard
    from streamseg.runtime.logs import setup_logging

    config = load_pipeline_or_exit(args.pipeline)
    secrets = [
        s.get_secret_value() for s in (config.redis.password, config.http.token) if s is not None
    ]
    setup_logging(args.log_level, secrets=secrets)
    cameras = list(config.cameras)
    if args.shard and config.fleet is not None:
        raise UsageError(
            "--shard and a fleet: section exclude each other: a fleet places the cameras "
            "itself (remove fleet: to use static shards)"
        )
    if args.shard:
        try:
            index, count = parse_shard(args.shard)
        except ValueError as exc:
            raise UsageError(f"--shard: {exc}") from None
        cameras = select_shard(cameras, index, count)
        log.info(
            "shard %d/%d: cameras %s", index, count, ", ".join(c.id for c in cameras) or "none"
        )
        if not cameras:
            raise UsageError(
                f"shard {index}/{count} has no cameras (pipeline.yaml has {len(config.cameras)}); "
                "use fewer shards than cameras"
            )
    from streamseg.cli.startup import environment_issues

    if args.download and not _download_weights(config.model):
        return EXIT_FAILURE
    issues = environment_issues(config, cameras)
    if issues:
        raise UsageError(f"cannot start:\n{ConfigError(args.pipeline, issues).format()}")
    return _serve(config, cameras, quiet=args.no_status, path=args.pipeline)


def _download_weights(model: ModelConfig) -> bool:
    """Fetch catalogue weights that are not cached yet; ``False`` after a failed download."""
    from streamseg.models.download import DownloadError, UnverifiedError, fetch

    entry = model.catalogue_entry()
    if entry is None:
        return True
    try:
        path = fetch(entry, progress=False)
    except UnverifiedError as exc:
        raise UsageError(f"model.weights: {exc}") from None
    except DownloadError as exc:
        log.error("model.weights: %s", exc)
        return False
    log.info("model: catalogue weights %s are at %s", entry.name, path)
    return True


def _serve(config, cameras, *, quiet: bool, path: str) -> int:
    import io

    from streamseg.runtime.service import Service

    stream = io.StringIO() if quiet else None
    service = Service(config, cameras=cameras, status_stream=stream, pipeline_path=path)
    try:
        return service.run()  # a StartupError is exit 2 (streamseg.cli.main)
    except FileNotFoundError as exc:
        raise UsageError(f"model.weights: {exc}") from None
    except OSError as exc:
        if "Address already in use" in str(exc) or getattr(exc, "errno", None) == 98:
            raise UsageError(
                f"http: port {config.http.port} is in use; set http.port (0 picks a free one)"
            ) from None
        raise
