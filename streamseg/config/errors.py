"""Re-exports ``streamseg.configbase.errors`` at its old path ``streamseg.config.errors``.

New code imports ``streamseg.configbase.errors``; the stages never import this package.
"""

from __future__ import annotations

from streamseg.configbase.errors import (
    ConfigError,
    ConfigIssue,
)

__all__ = ["ConfigError", "ConfigIssue"]
