"""Re-exports ``streamseg.publish.redis_config`` at its old path ``streamseg.config.redis``.

New code imports ``streamseg.publish.redis_config``; the stages never import this package.
"""

from __future__ import annotations

from streamseg.publish.redis_config import (
    RedisConfig,
)

__all__ = ["RedisConfig"]
