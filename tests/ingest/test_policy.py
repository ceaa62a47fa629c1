"""Reconnect backoff and frame-rate limiting."""

from __future__ import annotations

import random

import pytest

from streamseg.backoff import Backoff, ReconnectPolicy
from streamseg.ingest.policy import Connection, RateLimiter


def test_backoff_grows_exponentially_and_caps() -> None:
    policy = ReconnectPolicy(initial=0.5, max_delay=4.0, multiplier=2.0, jitter=0.0)
    backoff = Backoff(policy)
    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff.failures == 6
    backoff.reset()
    assert backoff.next_delay() == 0.5


def test_backoff_jitter_stays_within_bounds_and_varies() -> None:
    policy = ReconnectPolicy(initial=1.0, max_delay=1.0, jitter=0.25)
    rng = random.Random(7)
    delays = [policy.delay(3, rng) for _ in range(200)]
    assert all(0.75 <= d <= 1.25 for d in delays)
    assert max(delays) - min(delays) > 0.3  # spread: cameras do not retry in lock step


def test_backoff_exhausted_after_max_attempts() -> None:
    backoff = Backoff(ReconnectPolicy(max_attempts=2))
    assert not backoff.exhausted
    backoff.next_delay()
    backoff.next_delay()
    assert backoff.exhausted


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial": 0}, "initial must be > 0"),
        ({"initial": 2, "max_delay": 1}, "max_delay"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.0}, "jitter"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_policy_rejects_bad_values(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReconnectPolicy(**kwargs)


@pytest.mark.parametrize("kwargs", [{"read_timeout": 0}, {"connect_timeout": -1.0}])
def test_connection_rejects_a_timeout_that_is_not_positive(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="connect_timeout and read_timeout must be > 0"):
        Connection(**kwargs)


def _kept(limiter: RateLimiter, times: list[float]) -> list[int]:
    return [i for i, t in enumerate(times) if limiter.admit(t)]


@pytest.mark.parametrize(
    ("fps", "max_fps", "expected_kept_per_second"),
    [(30, 10, 10), (30, 15, 15), (30, 12, 12), (25, 5, 5), (15, 30, 15), (30, 29.97, 30)],
)
def test_rate_limiter_keeps_about_max_fps(
    fps: float, max_fps: float, expected_kept_per_second: int
) -> None:
    times = [i / fps for i in range(int(fps * 10))]  # ten seconds
    kept = _kept(RateLimiter(max_fps), times)
    assert abs(len(kept) - 10 * expected_kept_per_second) <= 1


def test_rate_limiter_picks_regular_frames_and_tolerates_jitter() -> None:
    rng = random.Random(0)
    times = [i / 30 + rng.uniform(-0.003, 0.003) for i in range(90)]
    kept = _kept(RateLimiter(10), times)
    assert kept == list(range(0, 90, 3))


def test_rate_limiter_restarts_when_time_goes_back() -> None:
    limiter = RateLimiter(1)
    assert _kept(limiter, [0.0, 0.5, 1.0, 1.5]) == [0, 2]
    assert limiter.admit(0.1)  # a loop or reconnect: timestamps restart


def test_rate_limiter_off_and_invalid() -> None:
    assert _kept(RateLimiter(None), [0.0, 0.0, 0.01]) == [0, 1, 2]
    with pytest.raises(ValueError, match="max_fps"):
        RateLimiter(0)
