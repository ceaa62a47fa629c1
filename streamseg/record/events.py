"""The alert events recording publishes itself (not a rule's): their kinds and builder.

:data:`RECORD_EVENTS` is the one list of them; the alert schema's ``kind``
enum and docs/events.md's table of kinds take them from here, after the
rules' kinds (``python -m streamseg.schemas.contract --write``). They go to
the same alert stream as the rules' events, with ``rule`` ``record``.
"""

from __future__ import annotations

import time
from typing import Any

from streamseg.types import Event

__all__ = ["RECORD_EVENTS", "RECORD_RULE", "disk_full_event"]

RECORD_RULE = "record"

# kind -> when it is published (docs/events.md)
RECORD_EVENTS: dict[str, str] = {
    "disk_full": (
        "a write found the disk full (`ENOSPC`): recording stopped until "
        "`record.retention.resume_free_mb` are free (one event per stop; `camera_id`: the "
        "camera whose write failed; `extra.dir`, `extra.free_mb`, `extra.error`)"
    ),
}


def disk_full_event(*, camera_id: str, directory: str, free_bytes: int, error: str) -> Event:
    """The one ``disk_full`` alert of a stop (no frame: ``frame_seq`` 0, ``pts`` null)."""
    extra: dict[str, Any] = {
        "dir": directory,
        "free_mb": round(free_bytes / 2**20, 3),
        "error": error,
    }
    return Event(
        rule=RECORD_RULE,
        kind="disk_full",
        camera_id=camera_id,
        time=time.time(),
        frame_seq=0,
        extra=extra,
    )
