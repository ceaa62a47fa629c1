"""The ``fleet:`` section of pipeline.yaml: workers that share the cameras through Redis.

Example::

    fleet:
      name: ${HOSTNAME}      # unique per worker; default: the host name
      capacity: 8            # cameras this worker serves at most
      lease_s: 5             # a camera's lease; its holder renews it
      console_url: http://${POD_IP}:8080   # where the other workers reach this one's console

Without the section (the default) ``serve`` runs the cameras of
pipeline.yaml (or its ``--shard``) alone. With it, the camera list lives in
Redis (pipeline.yaml seeds it once), every worker announces itself with a
heartbeat that expires after ``lease_s``, and each camera is served by the
one worker that holds its lease (``streamseg.fleet``).
"""

from __future__ import annotations

import os
import re
import socket

from pydantic import Field, ValidationInfo, field_validator

from streamseg.configbase.base import StrictModel

__all__ = ["FleetConfig"]


class FleetConfig(StrictModel):
    """One worker of a fleet.

    Attributes:
        name: this worker's name, unique in the fleet (a pod's name); default
            ``$HOSTNAME`` or the host name.
        capacity: the most cameras this worker serves at once.
        lease_s: seconds a camera's lease lasts without renewal; a dead
            worker's cameras move after about this long. The holder renews
            it every ``lease_s / 5`` and stops the camera when it has not
            renewed for ``lease_s - guard_s``.
        guard_s: how long before its lease could expire a worker that cannot
            renew stops publishing the camera (default ``max(1, lease_s / 4)``).
    """

    name: str | None = None
    capacity: int = Field(default=8, ge=1, le=10_000)
    lease_s: float = Field(default=5.0, ge=2.0, le=600.0)
    guard_s: float | None = Field(default=None, gt=0.0)
    console_url: str | None = Field(default=None, pattern=r"^https?://[^/\s]+/?$")

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,128}", value):
            raise ValueError("name must be 1-128 letters, digits, '_', '.', ':', '@' or '-'")
        return value

    @field_validator("guard_s")
    @classmethod
    def _check_guard(cls, value: float | None, info: ValidationInfo) -> float | None:
        lease = info.data.get("lease_s")
        if value is not None and lease is not None and value >= lease:
            raise ValueError(f"guard_s must be less than lease_s ({lease})")
        return value

    @property
    def worker_name(self) -> str:
        """``name``, else ``$HOSTNAME``, else the host name."""
        return self.name or os.environ.get("HOSTNAME") or socket.gethostname()

    @property
    def guard(self) -> float:
        """Seconds before the lease's expiry at which an unrenewed camera stops."""
        return self.guard_s if self.guard_s is not None else max(1.0, self.lease_s / 4)

    @property
    def tick_s(self) -> float:
        """Seconds between heartbeats and lease renewals."""
        return min(1.0, self.lease_s / 5)
