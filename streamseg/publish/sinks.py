"""The sinks of a pipeline: ``redis:`` plus every ``sinks:`` entry, built from the registry."""

from __future__ import annotations

import logging
from typing import Any

from streamseg.config.pipeline import PipelineConfig
from streamseg.config.sinks import PRIMARY_SINK, SINK_TYPES
from streamseg.publish.sink import Sink
from streamseg.redact import redact_url
from streamseg.registry import load

__all__ = ["build_sink", "build_sinks"]

log = logging.getLogger("streamseg.publish")


def build_sink(type_: str, cfg: Any, *, name: str) -> Sink:
    """The sink of type ``type_`` (a ``SINK_TYPES`` key) for its config ``cfg``."""
    sink: Sink = load(SINK_TYPES[type_].build)(cfg, name=name)
    return sink


def build_sinks(config: PipelineConfig) -> list[Sink]:
    """``redis:`` (sink ``redis``) first, then ``sinks:`` in their order."""
    entries: list[tuple[str, str, Any]] = [("redis", PRIMARY_SINK, config.redis)]
    entries += [(s.type, s.name, s) for s in config.sinks]
    sinks = []
    for type_, name, cfg in entries:
        where = redact_url(cfg.url) if isinstance(getattr(cfg, "url", None), str) else ""
        log.info("publish: sink %s (%s) %s", name, type_, where)
        sinks.append(build_sink(type_, cfg, name=name))
    return sinks
