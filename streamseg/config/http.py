"""The ``http:`` section of pipeline.yaml: ``serve``'s web server and the console on it."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from streamseg.configbase.base import StrictModel

__all__ = ["HttpConfig"]


class HttpConfig(StrictModel):
    """The web server of ``serve``: probes, metrics, the console and its API.

    ``port: 0`` picks one. ``token`` (usually ``${STREAMSEG_HTTP_TOKEN}``)
    is needed for every change made through the API, and for every page and
    read of the console when ``host`` is not a loopback address; without a
    token the console is read-only on loopback and off elsewhere.
    ``/healthz``, ``/readyz`` and ``/metrics`` never need it.
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    token: SecretStr | None = Field(
        default=None, description="bearer token for the console and its API (from the environment)"
    )
    console: bool = Field(default=True, description="serve the console pages and API")
    live_fps: float = Field(
        default=4.0, gt=0, le=30, description="frames per second sent to each live viewer"
    )
    jpeg_quality: int = Field(default=75, ge=10, le=95, description="JPEG quality of live frames")
    live_width: int = Field(
        default=640,
        ge=64,
        le=7680,
        description="live frames wider than this are scaled down (by an integer factor)",
    )
    trail_length: int = Field(
        default=16, ge=0, le=256, description="past positions drawn behind each track"
    )

    health_interval: float = Field(
        default=5.0, gt=0, le=60, description="seconds between camera health samples (charts)"
    )
    snapshots: bool = Field(
        default=True, description="keep alert snapshots for the console's events timeline"
    )
    snapshot_dir: str | None = Field(
        default=None, description="where snapshots are written; default a temporary folder"
    )
    snapshot_max_mb: float = Field(default=200.0, gt=0, description="disk kept for snapshots")
    snapshot_retention_hours: float = Field(
        default=24.0, gt=0, description="hours a snapshot is kept"
    )

    @field_validator("token", mode="after")
    @classmethod
    def _empty_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        """``${STREAMSEG_HTTP_TOKEN:-}`` with the variable unset means no token."""
        return None if value is not None and not value.get_secret_value() else value

    @property
    def loopback(self) -> bool:
        """Whether ``host`` only accepts connections from this machine."""
        return self.host in ("localhost", "::1") or self.host.startswith("127.")
