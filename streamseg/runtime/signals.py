"""SIGINT/SIGTERM for ``serve``: the first asks to drain, a second one exits at once (130).

A second signal within ``SAME_SIGNAL_S`` of the first is taken for the same
request delivered twice (a service manager signalling every process, a
script forwarding what a terminal also sent).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["SAME_SIGNAL_S", "StopSignals"]

log = logging.getLogger("streamseg.runtime")

# A second signal within this many seconds of the first is the same request.
SAME_SIGNAL_S = 1.0


class StopSignals:
    """Calls ``stop()`` on the first SIGINT/SIGTERM; ``enabled``: install handlers at all
    (they can only be installed from the main thread)."""

    def __init__(self, stop: Callable[[], None], *, enabled: bool = True) -> None:
        self.stop, self.enabled = stop, enabled
        self._signals = 0
        self._first_signal = 0.0  # time.monotonic() of the first signal

    def install(self) -> dict[int, Any]:
        """Install the handlers; returns the old ones for :meth:`restore`."""
        if not self.enabled or threading.current_thread() is not threading.main_thread():
            return {}
        old: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, self._on_signal)
        return old

    def restore(self, old: dict[int, Any]) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        now = time.monotonic()
        if self._signals and now - self._first_signal < SAME_SIGNAL_S:
            log.info("runtime: %s received again; already draining", name)
            return
        self._signals += 1
        if self._signals > 1:
            log.warning("runtime: second %s: exiting without draining", name)
            raise SystemExit(130)
        self._first_signal = now
        log.info("runtime: %s received", name)
        self.stop()
