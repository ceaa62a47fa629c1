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
calls come from it. A row's config model (a :class:`SinkEntry`) also
answers what the rest of streamseg asks of the type: what ``streamseg
check`` prints for a sink (:meth:`SinkEntry.describe`) and whether it takes
the console's alert snapshots (:meth:`SinkEntry.snapshot_switch`). A new
type is one new file in ``streamseg/publish/`` (a
``streamseg.publish.buffered.BufferedSink`` subclass and its
``build_sink(config, name=...)``), its config model next to
``RedisSinkConfig`` below, and one line in ``SINK_TYPES``; from outside the
package, :func:`register_sink_type` in a plug-in (``streamseg.plugins``).
The models live in this module, not beside their sinks, so that
validating a pipeline.yaml imports no sink's client library (redis-py,
paho-mqtt). The ``sinks:`` entries' union is built from the table by
:func:`sink_entry_union` (``streamseg.config.pipeline``), which closes it.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator

from streamseg.configbase.base import StrictModel
from streamseg.publish.connection import ServerConnection, UrlForm
from streamseg.publish.redis_config import RedisConfig
from streamseg.redact import redact_url
from streamseg.registry import Table
from streamseg.streams import availability_topic, mqtt_topic, state_topic

__all__ = [
    "MQTT_URL",
    "PRIMARY_SINK",
    "SINK_TYPES",
    "MQTTSinkConfig",
    "MQTTSnapshotConfig",
    "RedisSinkConfig",
    "SinkConfig",
    "SinkEntry",
    "SinkType",
    "register_sink_type",
    "sink_entry_union",
]

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

    def describe(self) -> str:
        """Where this sink's messages go, as ``streamseg check`` prints it after
        ``sink NAME (TYPE): `` (a URL without secrets, streams or topics)."""
        return ""

    def snapshot_switch(self) -> tuple[str, ...] | None:
        """The field (its path in the entry) that has this sink take the console's alert
        snapshots, when it is on; ``None`` when the sink takes none (the default).
        The pipeline checks that the console keeps snapshots for it."""
        return None


class RedisSinkConfig(RedisConfig, SinkEntry):
    """A further Redis: every field of the ``redis:`` section, plus ``type`` and ``name``."""

    type: Literal["redis"]


class MQTTSnapshotConfig(StrictModel):
    """Alert snapshots as JPEG payloads on ``<topic_prefix>/<camera>/snapshot`` (off by default).

    They are the console's alert snapshots (``http.console`` and
    ``http.snapshots`` must be on); one larger than ``max_kb`` is sent
    scaled down until it fits, or not at all.
    """

    enabled: bool = False
    max_kb: int = Field(default=256, ge=8, le=65536, description="largest JPEG sent, KiB")
    retain: bool = Field(default=True, description="the broker keeps each camera's latest")


MQTT_URL = UrlForm(
    name="mqtt",
    schemes=("mqtt", "mqtts"),
    tls_scheme="mqtts",
    example="mqtt://127.0.0.1:1883",
    credentials=False,
)


class MQTTSinkConfig(ServerConnection, SinkEntry):
    """An MQTT broker (Home Assistant, Frigate, Node-RED, ...): the same JSON as Redis.

    Topics: ``<topic_prefix>/<camera>/detections`` and ``<topic_prefix>/alerts``;
    retained ``<topic_prefix>/available`` (``online``, or ``offline`` by the
    broker's last will) and ``<topic_prefix>/<camera>/state`` (objects by
    class, health); optionally alert snapshots (docs/events.md, "MQTT").
    ``mqtts://`` (or ``tls.enabled``) turns TLS on; ``tls`` takes the same PEM
    files as Redis's. ``username``/``password`` are usually ``${MQTT_USERNAME}``
    and ``${MQTT_PASSWORD}``. Connection, TLS and delivery fields:
    ``ServerConnection``.
    """

    url_form = MQTT_URL

    type: Literal["mqtt"]
    url: str = "mqtt://127.0.0.1:1883"
    client_id: str | None = Field(
        default=None, description="MQTT client id (default: streamseg-<sink name>-<pid>)"
    )
    topic_prefix: str = "streamseg"
    qos: Literal[0, 1, 2] = 1
    retain: bool = False
    keepalive: int = Field(default=30, ge=5, le=3600, description="seconds")
    buffer_max_messages: int = Field(
        default=10_000, ge=1, description="messages kept while the broker is away"
    )
    socket_timeout: float = Field(
        default=5.0, gt=0, le=600, description="seconds to wait for CONNACK and PUBACKs"
    )
    availability: bool = Field(
        default=True,
        description=f"retained {availability_topic('<topic_prefix>')}: online, or offline "
        "(last will) once serve stops or dies",
    )
    state: bool = Field(
        default=True,
        description=f"retained {state_topic('<topic_prefix>', '<camera>')}: objects by class "
        "and health",
    )
    state_interval: float = Field(
        default=1.0, gt=0, le=3600, description="least seconds between two states of a camera"
    )
    snapshots: MQTTSnapshotConfig = MQTTSnapshotConfig()

    @field_validator("topic_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.:/-]{1,64}", value) or "//" in value:
            raise ValueError(
                "topic_prefix must be 1-64 letters, digits, '_', '.', ':', '-' or '/' "
                "(no '+', '#' or empty levels), e.g. streamseg or site1/streamseg"
            )
        return value.strip("/") or "streamseg"

    def describe(self) -> str:
        """The URL and topics (retained ones in brackets)."""
        prefix, cam = self.topic_prefix, "<camera>"
        extra = [
            name.removeprefix(f"{prefix}/")
            for name, on in (
                (availability_topic(prefix), self.availability),
                (state_topic(prefix, cam), self.state),
                (mqtt_topic(prefix, "snapshot", cam), self.snapshots.enabled),
            )
            if on
        ]
        retained = f" (retained: {', '.join(extra)})" if extra else ""
        topics = f"{mqtt_topic(prefix, 'detections', cam)}, {mqtt_topic(prefix, 'alert', cam)}"
        return f"{redact_url(self.url)}, topics {topics}{retained}"

    def snapshot_switch(self) -> tuple[str, ...] | None:
        return ("snapshots", "enabled") if self.snapshots.enabled else None

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urllib.parse.urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or (8883 if self.use_tls else 1883)


@dataclasses.dataclass(frozen=True)
class SinkType:
    """One sink type: the model of its ``sinks:`` entries and ``"module:function"``
    building the sink from one (``function(config, name=...) -> Sink``)."""

    config: type[SinkEntry]
    build: str


# type -> SinkType. The builder is imported only when a pipeline uses the type.
SINK_TYPES: Table[SinkType] = Table(
    "sink type",
    {
        "redis": SinkType(RedisSinkConfig, "streamseg.publish.redis_streams:build_sink"),
        "mqtt": SinkType(MQTTSinkConfig, "streamseg.publish.mqtt:build_sink"),
    },
)


def register_sink_type(name: str, row: SinkType) -> None:
    """Add sink type ``name`` (a plug-in's, before the pipeline's config is built;
    ``streamseg.registry.RegistryClosed`` after)."""
    SINK_TYPES.register(name, row)


def _entry_type(value: Any) -> Any:
    return value.get("type") if isinstance(value, dict) else getattr(value, "type", None)


def sink_entry_union() -> Any:
    """The type of one ``sinks:`` entry: the ``type``-tagged union of the table's config
    models. Closes :data:`SINK_TYPES` (a row registered later would be missing)."""
    types = SINK_TYPES.close("streamseg.config.pipeline")
    models = tuple(Annotated[t.config, Tag(key)] for key, t in types.items())
    if len(models) == 1:
        return types[PRIMARY_SINK].config
    # A missing or unknown type is told so, with the known ones, by the config
    # loader (streamseg.configbase.issues), as for rules.
    pick = Discriminator(_entry_type)
    return Annotated[Union[models], pick]  # noqa: UP007


SinkConfig = SinkEntry  # one ``sinks:`` entry, of any registered type


def check_sink_names(sinks: Sequence[Any]) -> Sequence[Any]:
    """Names are unique and differ from the ``redis:`` section's sink."""
    seen = {PRIMARY_SINK}
    for sink in sinks:
        if sink.name in seen:
            why = "the redis: section's sink" if sink.name == PRIMARY_SINK else "another sink"
            raise ValueError(f"sink name {sink.name!r} is already used by {why}; pick another")
        seen.add(sink.name)
    return sinks
