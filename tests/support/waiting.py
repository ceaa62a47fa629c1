"""Polling a condition in tests (for anything without a ``wait_for`` of its own)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["poll"]


def poll(
    predicate: Callable[[], Any],
    timeout: float = 5.0,
    what: str = "the condition",
    interval: float = 0.05,
) -> Any:
    """``predicate()``'s first truthy value; ``AssertionError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
