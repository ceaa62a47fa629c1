"""The ``redis:`` section of pipeline.yaml: where detections and alerts go."""

from __future__ import annotations

import re
import urllib.parse

from pydantic import Field, SecretStr, ValidationError, field_validator

from streamseg.config.base import StrictModel
from streamseg.streams import alerts_stream, detections_stream

__all__ = ["RedisConfig", "RedisTLSConfig"]


class RedisTLSConfig(StrictModel):
    """TLS to Redis (``rediss://`` URLs turn it on too). Paths are PEM files."""

    enabled: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = Field(default=True, description="check the server certificate and host name")


class RedisConfig(StrictModel):
    """Redis connection, stream names and the outage buffer.

    Streams: the detections stream of each camera and the alerts stream
    (``streamseg.streams``). ``username``/``password`` are usually
    ``${REDIS_USERNAME}``/``${REDIS_PASSWORD}``; they override credentials in
    the url. ``maxlen`` trims each stream approximately (``MAXLEN ~``).
    """

    url: str = "redis://127.0.0.1:6379/0"
    username: str | None = None
    password: SecretStr | None = None
    tls: RedisTLSConfig = RedisTLSConfig()
    stream_prefix: str = "streamseg"
    maxlen: int = Field(default=10_000, ge=1)
    alerts_maxlen: int = Field(default=100_000, ge=1)
    buffer_max_messages: int = Field(
        default=10_000, ge=1, description="messages kept while Redis is away"
    )
    reconnect_initial: float = Field(default=0.2, gt=0, le=60)
    reconnect_max: float = Field(default=10.0, gt=0, le=600)
    socket_timeout: float = Field(default=5.0, gt=0, le=600)
    max_batch: int = Field(default=256, ge=1, description="messages per pipelined round trip")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        try:
            parts = urllib.parse.urlsplit(value)
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError as exc:
            raise ValueError(f"malformed redis url ({exc})") from None
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError(
                "redis url must start with redis://, rediss:// (TLS) or unix:// "
                "(e.g. redis://127.0.0.1:6379/0)"
            )
        if parts.scheme != "unix" and not parts.hostname:
            raise ValueError("redis url has no host (e.g. redis://127.0.0.1:6379/0)")
        db = parts.path.lstrip("/")
        if parts.scheme != "unix" and db and not db.isdigit():
            raise ValueError(f"redis url database must be a number, got {db!r}")
        return value

    @field_validator("username", "password", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

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

    @property
    def use_tls(self) -> bool:
        return self.tls.enabled or self.url.startswith("rediss://")

    def detections_stream(self, camera_id: str) -> str:
        return detections_stream(self.stream_prefix, camera_id)

    @property
    def alerts_stream(self) -> str:
        return alerts_stream(self.stream_prefix)
