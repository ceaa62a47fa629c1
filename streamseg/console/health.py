"""Camera health over the last minutes, sampled for the console's charts.

``HealthHistory.sample(cameras)`` takes the ``/api/cameras`` view of every
camera (state, segmented and skipped frames, reconnects, stalls, time of
the last frame) and keeps, per camera, one point per call for ``window``
seconds: ``[time, fps, skipped/s, lag s, reconnects, stalls]``: ``fps`` the
camera's one figure (its ``fps`` there, which the tiles and the status line
show too), skipped/s from the difference with the previous sample. The console's web server calls it
every ``interval`` seconds on its own loop.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["FIELDS", "HealthHistory"]

FIELDS = ("time", "fps", "skipped_per_s", "lag_s", "reconnects", "stalls")


class HealthHistory:
    """Per-camera ring buffers of health points.

    Args:
        window: seconds kept (15 minutes by default).
        interval: seconds between samples (sets the buffers' length).
    """

    def __init__(self, *, window: float = 900.0, interval: float = 5.0) -> None:
        self.window, self.interval = window, interval
        self._points: dict[str, collections.deque[list[float | None]]] = {}
        self._last: dict[str, tuple[float, int, int]] = {}
        self._lock = threading.Lock()

    def sample(self, cameras: Mapping[str, Mapping[str, Any]], now: float | None = None) -> None:
        """Add one point per camera; cameras no longer listed are forgotten."""
        now = time.time() if now is None else now
        size = max(2, int(self.window / self.interval) + 1)
        with self._lock:
            for cid in [c for c in self._points if c not in cameras]:
                del self._points[cid]
                self._last.pop(cid, None)
            for cid, info in cameras.items():
                processed, skipped = int(info.get("segmented") or 0), int(info.get("skipped") or 0)
                last = self._last.get(cid)
                self._last[cid] = (now, processed, skipped)
                if last is None or now <= last[0]:
                    continue
                dt = now - last[0]
                frame_time = info.get("last_frame_time")
                lag = None if frame_time is None else max(0.0, now - float(frame_time))
                fps = info.get("fps")  # the camera's one fps figure (streamseg.runtime.rates)
                point: list[float | None] = [
                    round(now, 3),
                    None if fps is None else round(float(fps), 2),
                    round((skipped - last[2]) / dt, 2),
                    None if lag is None else round(lag, 3),
                    float(info.get("reconnects") or 0),
                    float(info.get("stalls") or 0),
                ]
                self._points.setdefault(cid, collections.deque(maxlen=size)).append(point)

    def series(self, camera_id: str) -> list[list[float | None]]:
        """The camera's points, oldest first (each as ``FIELDS``)."""
        with self._lock:
            return [list(p) for p in self._points.get(camera_id, ())]
