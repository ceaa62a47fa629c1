"""Ingest: camera sources (RTSP, files, V4L2, synthetic scenes) and decoders (PyAV, DALI).

Entry point: ``open_source(camera_id=..., url=...) -> Source``; see
``docs/ingest.md``. Names are imported on first use, so importing this
package loads nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "CameraHealth",
    "Connection",
    "DemuxSession",
    "HealthState",
    "PacketReader",
    "ReconnectPolicy",
    "Source",
    "SourceError",
    "StreamInfo",
    "open_source",
    "parse_source_url",
]

_WHERE = {
    "CameraHealth": "health",
    "HealthState": "health",
    "DemuxSession": "packets",
    "PacketReader": "packets",
    "StreamInfo": "packets",
    "Connection": "policy",
    "ReconnectPolicy": "streamseg.backoff",
    "Source": "base",
    "open_source": "source",
    "SourceError": "spec",
    "parse_source_url": "spec",
}

if TYPE_CHECKING:
    from streamseg.backoff import ReconnectPolicy
    from streamseg.ingest.base import Source
    from streamseg.ingest.health import CameraHealth, HealthState
    from streamseg.ingest.packets import DemuxSession, PacketReader, StreamInfo
    from streamseg.ingest.policy import Connection
    from streamseg.ingest.source import open_source
    from streamseg.ingest.spec import SourceError, parse_source_url


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'streamseg.ingest' has no attribute {name!r}")
    where = module if "." in module else f"streamseg.ingest.{module}"
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
