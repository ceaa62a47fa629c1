"""A source's connection settings and frame-rate limiting (the backoff: tests/test_backoff.py)."""

from __future__ import annotations

import random

import pytest

from streamseg.ingest.policy import Connection, RateLimiter


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
