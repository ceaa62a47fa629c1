"""A camera's frame rate: the one measure every display of it shows.

The status line, the console's tiles (``/api/cameras``), the badge drawn on
its live frames and its health chart all read ``PipelineStats.fps``, which
is a ``FrameRate`` per camera: the segmented frames captured in the last
``window`` seconds before the newest, ``(n - 1) / (newest - oldest)`` of
their capture times. Capture times, not the times frames were segmented:
frames are segmented in batches, in bursts, and a rate of those instants
says more about the batching than about the camera (a 5 fps camera whose
frames come two at a time read 8.4 on one display and 3.8 on another).
"""

from __future__ import annotations

import collections
import threading

__all__ = ["RATE_WINDOW_S", "FrameRate"]

RATE_WINDOW_S = 5.0


class FrameRate:
    """Frames per second of one camera, from the capture times of its segmented frames.

    Args:
        window: seconds of frames the rate is taken over (the two newest are
            kept whatever their age, so that a slow camera has a rate too).

    Example::

        >>> rate = FrameRate()
        >>> for k in range(11):
        ...     rate.add(100.0 + k / 5)
        >>> rate.value(now=102.1)
        5.0
        >>> rate.value(now=110.0) # nothing captured for longer than the window
        0.0
    """

    def __init__(self, window: float = RATE_WINDOW_S) -> None:
        self.window = window
        self._times: collections.deque[float] = collections.deque(maxlen=4096)
        self._lock = threading.Lock()

    def add(self, capture_time: float) -> None:
        """One frame segmented, captured at ``capture_time`` (unix seconds)."""
        with self._lock:
            times = self._times
            times.append(capture_time)
            while len(times) > 2 and times[0] < capture_time - self.window:
                times.popleft()

    def value(self, now: float) -> float | None:
        """Frames per second at wall time ``now``: ``None`` before two frames were
        seen, 0 once none was captured for ``window`` seconds (or three of its
        frame intervals, when slower)."""
        with self._lock:
            if len(self._times) < 2:
                return None
            first, last, n = self._times[0], self._times[-1], len(self._times)
        if last <= first:
            return None
        interval = (last - first) / (n - 1)
        if now - last > max(self.window, 3 * interval):
            return 0.0
        return 1.0 / interval
