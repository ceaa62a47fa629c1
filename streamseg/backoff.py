"""Retrying with exponential backoff and jitter: the one policy of every reconnect.

A camera's source (``streamseg.ingest``: ``reconnect:`` of a camera) and a
sink's delivery (``streamseg.publish.delivery.DeliveryOptions``:
``reconnect_initial`` / ``reconnect_max`` of a sink) wait by the same
:class:`ReconnectPolicy`; :class:`Backoff` counts one connection's failures.

Example:
    >>> ReconnectPolicy(initial=0.5, max_delay=2.0, jitter=0.0).delay(3)
    2.0
"""

from __future__ import annotations

import dataclasses
import random

__all__ = ["Backoff", "ReconnectPolicy"]


@dataclasses.dataclass(frozen=True)
class ReconnectPolicy:
    """How a connection is retried after it is lost (a camera's stream, a sink's server).

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
        max_attempts: consecutive failed attempts before giving up (a
            source's state ``failed``); ``None`` retries for ever (the default: a
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
    """Counts consecutive failures of one connection and hands out delays."""

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
