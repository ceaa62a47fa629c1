"""``DeliveryOptions``: how a sink delivers (outage buffer, batch size, reconnect backoff).

One object from the sink's config section to the ``BufferedSink`` that
uses it (``DeliveryOptions.of(section)``), instead of each field passed along
on its own.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

__all__ = ["DeliveryOptions"]


@dataclasses.dataclass(frozen=True)
class DeliveryOptions:
    """How a sink delivers.

    Attributes:
        buffer_max: messages kept while the destination is away (the oldest
            are dropped beyond it).
        max_batch: messages per write (one round trip).
        reconnect_initial / reconnect_max: the wait after the first failure,
            doubling up to the second, seconds.
        jitter: each wait is scaled by a random factor in ``[1 - jitter, 1 + jitter]``.
    """

    buffer_max: int = 10_000
    max_batch: int = 256
    reconnect_initial: float = 0.2
    reconnect_max: float = 10.0
    jitter: float = 0.2

    @classmethod
    def of(cls, section: Any) -> DeliveryOptions:
        """From a sink's config section (``streamseg.publish.connection.ServerConnection``:
        ``buffer_max_messages``, ``max_batch``, ``reconnect_initial``, ``reconnect_max``)."""
        return cls(
            buffer_max=section.buffer_max_messages,
            max_batch=section.max_batch,
            reconnect_initial=section.reconnect_initial,
            reconnect_max=section.reconnect_max,
        )

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` (>= 1) failed attempts in a row."""
        delay = min(self.reconnect_max, self.reconnect_initial * 2 ** min(failures - 1, 30))
        return delay * (1 + random.uniform(-self.jitter, self.jitter))
