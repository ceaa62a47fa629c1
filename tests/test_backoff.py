"""The one backoff of every reconnect (``streamseg.backoff``), and ``Closing``."""

from __future__ import annotations

import random

import pytest

from streamseg.backoff import Backoff, ReconnectPolicy
from streamseg.closing import Closing


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


def test_closing_closes_however_the_block_ends() -> None:
    class Held(Closing):
        closed = 0

        def close(self) -> None:
            self.closed += 1

    with Held() as held:
        assert held.closed == 0
    assert held.closed == 1
    with pytest.raises(KeyError), Held() as failing:
        raise KeyError("the block failed")
    assert failing.closed == 1
