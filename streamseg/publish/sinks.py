"""The sinks of a pipeline: ``redis:`` plus every ``sinks:`` entry, built from the registry."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.sink import Sink
from streamseg.publish.sink_config import PRIMARY_SINK, SINK_TYPES, SinkConfig
from streamseg.registry import load

__all__ = ["build_sink", "build_sinks"]

log = logging.getLogger("streamseg.publish")


def build_sink(type_: str, cfg: Any, *, name: str) -> Sink:
    """The sink of type ``type_`` (a ``SINK_TYPES`` key) for its config ``cfg``."""
    sink: Sink = load(SINK_TYPES[type_].build)(cfg, name=name)
    return sink


def build_sinks(*, redis: RedisConfig, sinks: Sequence[SinkConfig] = ()) -> list[Sink]:
    """The sinks of the ``redis:`` section (sink ``redis``) first, then of the ``sinks:``
    entries in their order."""
    entries: list[tuple[str, str, Any]] = [("redis", PRIMARY_SINK, redis)]
    entries += [(s.type, s.name, s) for s in sinks]
    built = []
    for type_, name, cfg in entries:
        log.info("publish: sink %s (%s) %s", name, type_, cfg.describe())
        built.append(build_sink(type_, cfg, name=name))
    return built
