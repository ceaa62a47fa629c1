"""The ``redis:`` section of pipeline.yaml: where detections and alerts go."""

from __future__ import annotations

import re
import urllib.parse

from pydantic import Field, ValidationError, field_validator

from streamseg.publish.connection import ServerConnection, TLSConfig, UrlForm
from streamseg.streams import alerts_stream, detections_stream

__all__ = ["REDIS_URL", "RedisConfig", "RedisTLSConfig"]

RedisTLSConfig = TLSConfig  # the name it had before MQTT shared it

REDIS_URL = UrlForm(
    name="redis",
    schemes=("redis", "rediss", "unix"),
    tls_scheme="rediss",
    example="redis://127.0.0.1:6379/0",
    hostless=("unix",),
    database=True,
)


class RedisConfig(ServerConnection):
    """Redis connection, stream names and the outage buffer.

    Streams: the detections stream of each camera and the alerts stream
    (``streamseg.streams``). ``username``/``password`` are usually
    ``${REDIS_USERNAME}``/``${REDIS_PASSWORD}``; they override credentials in
    the url. ``maxlen`` trims each stream approximately (``MAXLEN ~``).
    Connection, TLS and delivery fields: ``ServerConnection``.
    """

    url_form = REDIS_URL

    url: str = "redis://127.0.0.1:6379/0"
    stream_prefix: str = "streamseg"
    maxlen: int = Field(default=10_000, ge=1)
    alerts_maxlen: int = Field(default=100_000, ge=1)
    buffer_max_messages: int = Field(
        default=10_000, ge=1, description="messages kept while Redis is away"
    )
    max_batch: int = Field(default=256, ge=1, description="messages per pipelined round trip")

    @field_validator("stream_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", value):
            raise ValueError("stream_prefix must be 1-64 letters, digits, '_', '.', ':' or '-'")
        return value

    def with_url(self, url: str) -> RedisConfig:
        """This section pointed at ``url`` (validated; ``ValueError`` when it is not
        a redis url). Credentials written in ``url`` replace ``username``/``password``."""
        parts = urllib.parse.urlsplit(url)
        update: dict[str, object] = {"url": url}
        if parts.username or parts.password:
            update.update(username=None, password=None)
        try:
            return RedisConfig.model_validate({**self.model_dump(), **update})
        except ValidationError as exc:
            raise ValueError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None

    def describe(self) -> str:
        """Where its messages go, for ``streamseg check``: the URL (no secrets) and streams."""
        from streamseg.redact import redact_url

        return f"{redact_url(self.url)}, streams {self.stream_prefix}:*"

    def detections_stream(self, camera_id: str) -> str:
        return detections_stream(self.stream_prefix, camera_id)

    @property
    def alerts_stream(self) -> str:
        return alerts_stream(self.stream_prefix)
