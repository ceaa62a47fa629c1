"""The ``sinks:`` section, and the registry of sink types.

``redis:`` stays what it always was: the Redis a service publishes to
(sink ``redis``), which also carries hot-swap requests and is what
``subscribe``, ``replay`` and ``swap`` read by default. ``sinks:`` lists
further destinations, each with a ``type`` from :data:`SINK_TYPES` and a
unique ``name``; every message goes to every sink::

    sinks:
      - type: redis            # a second Redis, e.g. a central one
        name: central
        url: rediss://central.example:6380/0
        password: ${CENTRAL_REDIS_PASSWORD}

:data:`SINK_TYPES` is the only list of sink types: the config models of
``sinks:`` entries (and their ``type`` values) and the builders the runtime
calls come from it. A new type (MQTT, say) is one new file in
``streamseg/publish/`` (a ``streamseg.publish.sink.BufferedSink`` subclass
and its ``build_sink(config, name=...)``), its config model next to
``RedisSinkConfig`` below, and one line in ``SINK_TYPES``. The models live
here rather than beside their sinks because config sits below publish in
the layers (publish reads config; config never imports publish).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field

from streamseg.config.base import StrictModel
from streamseg.config.redis import RedisConfig

__all__ = ["PRIMARY_SINK", "SINK_TYPES", "RedisSinkConfig", "SinkConfig", "SinkEntry", "SinkType"]

PRIMARY_SINK = "redis"  # the name of the sink the ``redis:`` section describes


def _check_name(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", value):
        raise ValueError("a sink name is 1-32 lowercase letters, digits, '_' or '-' (e.g. central)")
    return value


SinkName = Annotated[str, AfterValidator(_check_name)]


class SinkEntry(StrictModel):
    """What every ``sinks:`` entry has: its ``type`` (a ``SINK_TYPES`` key) and ``name``."""

    type: str
    name: SinkName


class RedisSinkConfig(RedisConfig, SinkEntry):
    """A further Redis: every field of the ``redis:`` section, plus ``type`` and ``name``."""

    type: Literal["redis"]


@dataclasses.dataclass(frozen=True)
class SinkType:
    """One sink type: the model of its ``sinks:`` entries and ``"module:function"``
    building the sink from one (``function(config, name=...) -> Sink``)."""

    config: type[SinkEntry]
    build: str


# type -> SinkType. The builder is imported only when a pipeline uses the type.
SINK_TYPES: dict[str, SinkType] = {
    "redis": SinkType(RedisSinkConfig, "streamseg.publish.redis_streams:build_sink"),
}


def _entry_union() -> Any:
    models = tuple(t.config for t in SINK_TYPES.values())
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="type")]  # noqa: UP007


if TYPE_CHECKING:
    SinkConfig = SinkEntry  # one ``sinks:`` entry, of any registered type
else:
    SinkConfig = _entry_union()


def check_sink_names(sinks: Sequence[Any]) -> Sequence[Any]:
    """Names are unique and differ from the ``redis:`` section's sink."""
    seen = {PRIMARY_SINK}
    for sink in sinks:
        if sink.name in seen:
            why = "the redis: section's sink" if sink.name == PRIMARY_SINK else "another sink"
            raise ValueError(f"sink name {sink.name!r} is already used by {why}; pick another")
        seen.add(sink.name)
    return sinks
