"""Re-exports ``streamseg.ingest.config`` at its old path ``streamseg.config.cameras``.

New code imports ``streamseg.ingest.config``; the stages never import this package.
"""

from __future__ import annotations

from streamseg.ingest.config import (
    CameraConfig,
    ReconnectConfig,
    check_camera_url,
)

__all__ = ["CameraConfig", "ReconnectConfig", "check_camera_url"]
