"""Reconnect policy (exponential backoff with jitter) and frame-rate limiting."""

from __future__ import annotations

import dataclasses
import random

__all__ = ["Backoff", "RateLimiter", "ReconnectPolicy"]


@dataclasses.dataclass(frozen=True)
class ReconnectPolicy:
    """How a live source retries after losing its stream.

    The n-th consecutive retry (n = 0, 1, ...) waits
    ``min(max_delay, initial * multiplier**n)`` seconds, scaled by a random
    factor in ``[1 - jitter, 1 + jitter]`` so that cameras that dropped
    together do not reconnect in lock step. The count restarts once a
    connection delivers packets again.

    Attributes:
        initial: first delay, seconds (> 0).
        max_delay: cap on the delay, seconds (>= initial).
        multiplier: growth per failed attempt (>= 1).
        jitter: relative spread, in ``[0, 1)``.
        max_attempts: consecutive failed attempts before the source gives up
            (state ``failed``); ``None`` retries for ever (the default: a
            camera may come back after hours).
    """

    initial: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.2
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        if not self.initial > 0:
            raise ValueError(f"reconnect.initial must be > 0 seconds, got {self.initial}")
        if self.max_delay < self.initial:
            raise ValueError(
                f"reconnect.max_delay ({self.max_delay}) must be >= initial ({self.initial})"
            )
        if self.multiplier < 1:
            raise ValueError(f"reconnect.multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"reconnect.jitter must be in [0, 1), got {self.jitter}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"reconnect.max_attempts must be >= 1, got {self.max_attempts}")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        base = min(self.max_delay, self.initial * self.multiplier ** min(attempt, 64))
        r = (rng or random).uniform(-self.jitter, self.jitter)
        return base * (1.0 + r)


class Backoff:
    """Counts consecutive failures of one source and hands out delays."""

    def __init__(self, policy: ReconnectPolicy, *, seed: int | None = None) -> None:
        self.policy = policy
        self.failures = 0
        self._rng = random.Random(seed)

    def next_delay(self) -> float:
        """The delay before the next attempt; counts one more failure."""
        d = self.policy.delay(self.failures, self._rng)
        self.failures += 1
        return d

    @property
    def exhausted(self) -> bool:
        m = self.policy.max_attempts
        return m is not None and self.failures >= m

    def reset(self) -> None:
        self.failures = 0


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
