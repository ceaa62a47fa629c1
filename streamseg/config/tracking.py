"""Re-exports ``streamseg.track.config`` at its old path ``streamseg.config.tracking``.

New code imports ``streamseg.track.config``; the stages never import this package.
"""

from __future__ import annotations

from streamseg.track.config import (
    TrackingConfig,
)

__all__ = ["TrackingConfig"]
