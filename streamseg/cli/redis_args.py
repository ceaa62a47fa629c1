"""``--redis URL`` and ``--pipeline FILE``: how ``subscribe`` and ``swap`` find a service's Redis.

``--pipeline`` takes the whole ``redis:`` section of a pipeline.yaml (url,
``${REDIS_PASSWORD}``, TLS CA and client certificate) and its
``stream_prefix``, reading that section alone (no other section's
``${ENV}``, such as the console's token, is asked for); ``--redis``
replaces only the url (its own credentials, when it has some, replace the
section's). Without either: the url in
``$STREAMSEG_REDIS_URL``, else ``redis://127.0.0.1:6379/0``. The client is
opened by ``streamseg.publish.connect.redis_client``, like the service's.

``replay`` and ``render`` read recorded detections (``--input FILE`` or
``--redis [URL]``) through one ``streamseg.client.recording.Recording``,
opened by :func:`open_recording`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel

from streamseg.cli import EXIT_FAILURE, UsageError
from streamseg.config.pipeline import PipelineConfig
from streamseg.publish.redis_config import RedisConfig
from streamseg.streams import detections_stream

if TYPE_CHECKING:
    from streamseg.client.recording import Recording

__all__ = [
    "add_detections_source",
    "add_redis_arguments",
    "load_pipeline_or_exit",
    "open_recording",
    "pipeline_section",
    "redis_failure",
    "redis_section",
    "stream_prefix",
]

URL_ENV = "STREAMSEG_REDIS_URL"

M = TypeVar("M", bound=BaseModel)


def add_redis_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis",
        metavar="URL",
        help=f"redis://[user:password@]host:port/db or rediss:// (default: the --pipeline's "
        f"redis.url, else ${URL_ENV}, else redis://127.0.0.1:6379/0)",
    )
    parser.add_argument(
        "--pipeline",
        metavar="FILE",
        help="take the Redis url, password, TLS files and stream prefix from this pipeline.yaml",
    )
    parser.add_argument(
        "--prefix", help="stream prefix (default: the --pipeline's stream_prefix, else streamseg)"
    )


def add_detections_source(parser: argparse.ArgumentParser, *, redis_default: str) -> None:
    """Where recorded detections messages come from (one is required): ``--input
    FILE`` (JSON lines, ``-`` for stdin) or ``--redis [URL]``, the URL defaulting
    as ``redis_default`` says."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--input", metavar="FILE", help="JSON-lines file of detections messages ('-': stdin)"
    )
    source.add_argument(
        "--redis",
        nargs="?",
        const="",
        metavar="URL",
        help=f"read {detections_stream('<prefix>', '<camera>')} streams "
        f"(URL default: {redis_default})",
    )


def load_pipeline_or_exit(path: str) -> PipelineConfig:
    """The validated pipeline.yaml at ``path``; a config error is a ``UsageError`` (exit 2)."""
    from streamseg.config import ConfigError, load_pipeline

    try:
        return load_pipeline(path)
    except ConfigError as exc:
        raise UsageError(f"invalid pipeline:\n{exc.format()}") from None


def redis_section(args: argparse.Namespace, config: PipelineConfig | None = None) -> RedisConfig:
    """The ``redis:`` section the command connects with (see the module docstring)."""
    section = RedisConfig()
    pipeline = getattr(args, "pipeline", None)
    if config is not None:
        section = config.redis
    elif pipeline:
        section = pipeline_section(pipeline, "redis", RedisConfig)
    url = args.redis or (None if config is not None or pipeline else os.environ.get(URL_ENV))
    if not url:
        return section
    try:
        return section.with_url(url)
    except ValueError as exc:
        raise UsageError(f"--redis: {exc}") from None


def pipeline_section(path: str, key: str, schema: type[M]) -> M:
    """The ``key:`` section of the pipeline.yaml at ``path`` alone: a reader of the
    streams needs no other section, nor their ``${ENV}`` variables (the console's
    token). A config error is a ``UsageError`` (exit 2)."""
    from streamseg.config import ConfigError
    from streamseg.config.loader import load_section

    try:
        return load_section(path, key, schema)
    except ConfigError as exc:
        raise UsageError(f"invalid pipeline:\n{exc.format()}") from None


def stream_prefix(args: argparse.Namespace, section: RedisConfig) -> str:
    return str(args.prefix or section.stream_prefix)


def open_recording(args: argparse.Namespace, config: PipelineConfig | None) -> Recording:
    """The recorded detections ``add_detections_source``'s arguments name: the
    ``--input`` file, else the ``--redis`` url (default: ``config``'s
    ``redis:`` section, whose password and TLS files apply either way) with
    ``--prefix`` (default: the section's ``stream_prefix``). Nothing is read yet."""
    from streamseg.client.recording import Recording

    if args.input is not None:
        return Recording.from_file(args.input)
    section = redis_section(argparse.Namespace(redis=args.redis or None), config)
    return Recording.from_redis(section, prefix=args.prefix)


def redis_failure(where: str, exc: Exception, *, doing: str = "reach") -> int:
    """Say on stderr that Redis at ``where`` (a redacted url) failed; the exit code (1)."""
    from streamseg.redact import redact_text

    print(f"streamseg: cannot {doing} Redis at {where}: {redact_text(str(exc))}", file=sys.stderr)
    return EXIT_FAILURE
