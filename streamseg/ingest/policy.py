"""How a source connects (``Connection``: the backoff and timeouts) and frame-rate limiting.

The backoff itself, ``ReconnectPolicy`` and ``Backoff``, is ``streamseg.backoff``'s:
the sinks reconnect with the same policy.
"""

from __future__ import annotations

import dataclasses

from streamseg.backoff import ReconnectPolicy

__all__ = ["Connection", "RateLimiter"]


@dataclasses.dataclass(frozen=True)
class Connection:
    """How a source reaches its stream and keeps it: the one settings object that
    ``open_source``, ``StreamSource``, ``PacketReader`` and ``streamseg record`` take
    (a camera's ``reconnect:`` section gives its own, ``ReconnectConfig.connection()``).

    Attributes:
        reconnect: the backoff between attempts.
        connect_timeout: seconds to connect and probe the stream (> 0).
        read_timeout: seconds without a packet before a live stream is stalled (> 0).
    """

    reconnect: ReconnectPolicy = dataclasses.field(default_factory=ReconnectPolicy)
    connect_timeout: float = 5.0
    read_timeout: float = 5.0

    def __post_init__(self) -> None:
        if not (self.connect_timeout > 0 and self.read_timeout > 0):
            raise ValueError("connect_timeout and read_timeout must be > 0 seconds")


class RateLimiter:
    """Keeps at most ``max_fps`` frames per second of stream time.

    ``admit(t, wall=...)`` decides by the frame's timestamp ``t`` (seconds,
    the PTS). Frames are kept on a grid of period ``1 / max_fps`` with a
    small tolerance for timestamp jitter, so a 30 fps stream limited to 10
    keeps every third frame. A timestamp that goes backwards (a loop, a
    reconnect) restarts the grid. Frames without a timestamp are judged by
    their arrival time ``wall`` while the stream has given no timestamps
    yet, and as simultaneous with the previous frame after that.
    """

    def __init__(self, max_fps: float | None) -> None:
        if max_fps is not None and not max_fps > 0:
            raise ValueError(f"max_fps must be > 0, got {max_fps}")
        self.period = 0.0 if max_fps is None else 1.0 / max_fps
        self._next: float | None = None
        self._last: float | None = None
        self._timed = False  # has the stream given timestamps?

    def admit(self, t: float | None, *, wall: float | None = None) -> bool:
        if self.period == 0.0:
            return True
        if t is None:
            t = self._last if self._timed else wall
            if t is None:
                return True
        elif not self._timed:
            self._timed = True
            if self._last is not None:  # wall-clock frames came first: switch clocks
                self._last, self._next = t, t + self.period
                return False
        return self._on_grid(t)

    def _on_grid(self, t: float) -> bool:
        if self._last is not None and t < self._last:
            self._next = None
        self._last = t
        tolerance = 0.1 * self.period
        if self._next is not None and t < self._next - tolerance:
            return False
        if self._next is None or t - self._next >= self.period:
            self._next = t + self.period
        else:
            self._next += self.period
        return True
