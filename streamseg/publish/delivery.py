"""``DeliveryOptions``: how a sink delivers (outage buffer, batch size, reconnect backoff).

One object from the sink's config section to the ``BufferedSink`` that
uses it (``DeliveryOptions.of(section)``), instead of each field passed along
on its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from streamseg.backoff import ReconnectPolicy

__all__ = ["DeliveryOptions"]


@dataclasses.dataclass(frozen=True)
class DeliveryOptions:
    """How a sink delivers.

    Attributes:
        buffer_max: messages kept while the destination is away (the oldest
            are dropped beyond it).
        max_batch: messages per write (one round trip).
        reconnect: the wait after each failure in a row (``streamseg.backoff``, the
            policy a camera's source retries by too).
    """

    buffer_max: int = 10_000
    max_batch: int = 256
    reconnect: ReconnectPolicy = dataclasses.field(
        default_factory=lambda: ReconnectPolicy(initial=0.2, max_delay=10.0)
    )

    @classmethod
    def of(cls, section: Any) -> DeliveryOptions:
        """From a sink's config section (``streamseg.publish.connection.ServerConnection``:
        ``buffer_max_messages``, ``max_batch``, ``reconnect_initial``, ``reconnect_max``)."""
        return cls(
            buffer_max=section.buffer_max_messages,
            max_batch=section.max_batch,
            # a maximum under the first wait caps every wait at it
            reconnect=ReconnectPolicy(
                initial=min(section.reconnect_initial, section.reconnect_max),
                max_delay=section.reconnect_max,
            ),
        )
