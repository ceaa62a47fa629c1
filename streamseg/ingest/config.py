"""The ``cameras:`` section of pipeline.yaml: one entry per camera."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from streamseg.configbase.base import StrictModel
from streamseg.configbase.choices import check_choice, literal_of
from streamseg.ingest.spec import DECODERS

if TYPE_CHECKING:
    from streamseg.backoff import ReconnectPolicy
    from streamseg.ingest.policy import Connection

__all__ = ["CameraConfig", "ReconnectConfig", "check_camera_url"]

# The decoders' names (a JSON-schema enum), from ingest's one list.
if TYPE_CHECKING:
    DecoderName = str
else:
    DecoderName = literal_of(DECODERS.close("streamseg.ingest.config"))

_CAMERA_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ReconnectConfig(StrictModel):
    """How a live camera reconnects after it is lost (seconds).

    The wait before attempt ``k`` is ``min(initial * 2**k, max)``, then a
    random ``+-jitter`` fraction is applied to it.
    """

    initial_backoff: float = Field(default=0.5, gt=0, le=3600)
    max_backoff: float = Field(default=30.0, gt=0, le=3600)
    jitter: float = Field(default=0.2, ge=0, le=1)
    connect_timeout: float = Field(default=5.0, gt=0, le=600)
    read_timeout: float = Field(
        default=5.0, gt=0, le=600, description="no frame for this long: the stream is stalled"
    )

    @model_validator(mode="after")
    def _backoff_order(self) -> ReconnectConfig:
        if self.max_backoff < self.initial_backoff:
            raise ValueError(
                f"max_backoff ({self.max_backoff}) must be >= initial_backoff "
                f"({self.initial_backoff})"
            )
        return self

    def policy(self) -> ReconnectPolicy:
        """The backoff as ingest runs it (``serve``'s sources and ``streamseg record``
        alike; a jitter of 1 is just under it there)."""
        from streamseg.backoff import ReconnectPolicy

        return ReconnectPolicy(
            initial=self.initial_backoff, max_delay=self.max_backoff, jitter=min(self.jitter, 0.99)
        )

    def connection(self) -> Connection:
        """The backoff and timeouts as the camera's source (or ``streamseg record``) takes them."""
        from streamseg.ingest.policy import Connection

        return Connection(self.policy(), self.connect_timeout, self.read_timeout)


class CameraConfig(StrictModel):
    """One camera.

    ``url`` is ``rtsp://[user:password@]host[:port]/path`` (credentials may
    come from ``${ENV}`` variables), another network stream of
    :data:`streamseg.ingest.spec.SCHEMES` (``srt://``, ``rtmps://``, ...), a
    video file path or ``file://`` URL, ``v4l2:///dev/video0``, or
    ``synthetic://?seed=1&width=640&height=360``.
    """

    id: str = Field(description="unique camera id: letters, digits, '_', '-', '.'")
    url: str
    max_fps: float | None = Field(default=None, gt=0, le=1000)
    decode: DecoderName = "pyav"
    live: bool | None = Field(
        default=None,
        description="override: live drops oldest frames when behind, not live gets backpressure",
    )
    realtime: bool = Field(default=False, description="files: pace reading at the clip's rate")
    loop: bool = Field(default=False, description="files: start again at the end")
    reconnect: ReconnectConfig = ReconnectConfig()

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _CAMERA_ID.fullmatch(value):
            raise ValueError(
                "camera id must be 1-64 letters, digits, '_', '-' or '.', starting with a "
                "letter or digit (it becomes part of Redis stream names)"
            )
        return value

    @field_validator("decode", mode="before")
    @classmethod
    def _known_decoder(cls, value: Any) -> Any:
        return check_choice("decoder", value, DECODERS)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return check_camera_url(value)


def check_camera_url(url: str) -> str:
    """Validate a camera URL (no I/O); raise ``ValueError`` naming the problem.

    The one parser of :mod:`streamseg.ingest.spec` decides, so what the
    config accepts is exactly what ingest opens (its scheme table). The
    message never quotes a password.
    """
    from streamseg.ingest.spec import SourceError, parse_source_url

    try:
        parse_source_url(url, camera_id=None)
    except SourceError as exc:
        raise ValueError(str(exc)) from None
    return url.strip()
