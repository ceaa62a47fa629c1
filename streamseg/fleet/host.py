"""The seam between the fleet and the service it runs in: start and stop one camera.

``streamseg.runtime.camera_changes.ServedCameras`` (the service's cameras)
implements :class:`CameraHost`; the fleet never reaches into the service's
fields. Its calls may block for a
few seconds (a camera's frames in flight drain before it is forgotten), so
the fleet makes them from threads of its own, in order per camera.
"""

from __future__ import annotations

from typing import Protocol

from streamseg.ingest.config import CameraConfig

__all__ = ["CameraHost"]


class CameraHost(Protocol):
    """What a fleet worker asks of the service it runs in."""

    def start_camera(self, camera: CameraConfig) -> None:
        """Start serving ``camera`` (``ValueError`` when it cannot now: retried)."""
        ...

    def stop_camera(self, camera_id: str) -> None:
        """Stop serving ``camera_id`` (``KeyError`` when it is not served)."""
        ...

    def camera_states(self) -> dict[str, str]:
        """``{camera id: state}`` (``streaming``, ``connecting``, ...) of the cameras served."""
        ...
