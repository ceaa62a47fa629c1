"""Run an ingest ``Source`` in a thread and watch what it emits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from streamseg.types import Frame


class SourceRunner:
    """``source.run(emit, stop)`` in a daemon thread, frames collected in order.

    Use as a context manager (stops and joins on exit). ``error`` holds what
    ``run`` raised, if anything.
    """

    def __init__(self, source: Any, *, on_frame: Callable[[Frame], None] | None = None) -> None:
        self.source = source
        self.frames: list[Frame] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._on_frame = on_frame
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="source-runner", daemon=True)

    def _emit(self, frame: Frame) -> None:
        with self._lock:
            self.frames.append(frame)
        if self._on_frame is not None:
            self._on_frame(frame)

    def _run(self) -> None:
        try:
            self.source.run(self._emit, self.stop)
        except BaseException as exc:
            self.error = exc

    def start(self) -> SourceRunner:
        self._thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.frames)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str = "") -> float:
        """Poll ``predicate`` until true; return the seconds it took, fail on timeout."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if predicate():
                return time.monotonic() - t0
            if self.error is not None:
                raise AssertionError(f"source failed while waiting for {what}: {self.error!r}")
            time.sleep(0.02)
        raise AssertionError(
            f"timed out after {timeout}s waiting for {what or predicate}; "
            f"health: {self.source.health}"
        )

    def wait_frames(self, n: int, timeout: float) -> float:
        """Wait until ``n`` more frames than now have arrived."""
        target = self.count() + n
        return self.wait_for(lambda: self.count() >= target, timeout, f"{n} frames")

    def wait_state(self, state: str, timeout: float) -> float:
        return self.wait_for(
            lambda: str(self.source.health.state) == state, timeout, f"state {state}"
        )

    def join(self, timeout: float) -> bool:
        """Wait for ``run`` to return; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self, timeout: float = 15.0) -> None:
        self.stop.set()
        if not self.join(timeout):
            raise AssertionError(f"source.run did not return {timeout}s after stop")

    def __enter__(self) -> SourceRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
