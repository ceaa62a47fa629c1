"""The latest frame of each watched camera, with what the pipeline found in it.

The runtime's segment thread calls ``LiveView.wants(camera)`` for every
frame it has segmented and keeps the frame's pixels only when someone
watches that camera; after tracking, the track thread hands the pixels,
the tracked instances and the rule counts to ``offer``. ``offer`` stores references in
one slot per camera (no copy, no drawing, no encoding): the viewers draw
and encode in their own threads at their own rate. So a camera nobody
watches costs one dictionary lookup per frame, and a watched one a few
more.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torch import Tensor

from streamseg.track.alerts import CameraAlerts
from streamseg.types import Event, FrameResult, Instances

if TYPE_CHECKING:
    from streamseg.console.events import EventLog

__all__ = ["LiveFrame", "LiveView", "Trails"]


class Trails:
    """The last ``length`` box centres of each track of one camera (the overlays' trails).

    ``update`` takes a tracked frame's instances and returns ``{track id:
    [(x, y), ...]}``, oldest first; a track not in the frame is forgotten.
    """

    def __init__(self, length: int) -> None:
        self.length = length
        self._points: dict[int, collections.deque[tuple[float, float]]] = {}

    def update(self, instances: Instances) -> dict[int, list[tuple[float, float]]]:
        if instances.track_ids is None or self.length == 0:
            return {}
        boxes = instances.boxes.detach().to("cpu").tolist()
        seen = set()
        for tid, (x1, y1, x2, y2) in zip(instances.track_ids.tolist(), boxes, strict=True):
            if tid < 0:
                continue
            seen.add(tid)
            trail = self._points.setdefault(tid, collections.deque(maxlen=self.length))
            trail.append(((x1 + x2) / 2, (y1 + y2) / 2))
        for tid in [t for t in self._points if t not in seen]:
            del self._points[tid]
        return {tid: list(trail) for tid, trail in self._points.items()}


@dataclasses.dataclass(frozen=True)
class LiveFrame:
    """One camera's latest tracked frame.

    ``image``: ``uint8 (H, W, 3)`` RGB (on the device the camera decodes
    to); ``result``: the tracked ``FrameResult`` of that image; ``trails``:
    ``{track id: [(x, y), ...]}`` box centres, oldest first; ``counts``:
    zone occupancy and line ``(in, out)`` by name; ``fps``: the camera's
    frames per second when it was offered (``LiveView``'s ``fps_of``, 0 unknown).
    """

    image: Tensor
    result: FrameResult
    trails: Mapping[int, list[tuple[float, float]]]
    counts: Mapping[str, Any]
    fps: float
    time: float

    @property
    def seq(self) -> int:
        return self.result.frame.seq


class LiveView:
    """Latest-frame slots, filled only for cameras with at least one viewer.

    Args:
        trail_length: past positions kept per track.
    """

    def __init__(
        self,
        *,
        trail_length: int = 16,
        events: EventLog | None = None,
        rules_of: Callable[[str], CameraAlerts | None] | None = None,
        fps_of: Callable[[str], float | None] | None = None,
    ) -> None:
        self.trail_length = trail_length
        self.events, self.rules_of, self.fps_of = events, rules_of, fps_of
        self._viewers: dict[str, int] = collections.defaultdict(int)
        self._slots: dict[str, LiveFrame] = {}
        self._trails: dict[str, Trails] = {}
        self._lock = threading.Lock()

    def wants(self, camera_id: str) -> bool:
        """Whether a viewer watches ``camera_id`` or its alerts get snapshots (cheap)."""
        if self._viewers.get(camera_id, 0) > 0:
            return True
        if self.events is None or self.rules_of is None:
            return False
        rules = self.rules_of(camera_id)
        return rules is not None and bool(rules.rules)

    @contextlib.contextmanager
    def watch(self, camera_id: str) -> Iterator[None]:
        """Count one viewer of ``camera_id`` while the block runs."""
        with self._lock:
            self._viewers[camera_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._viewers[camera_id] -= 1
                if self._viewers[camera_id] <= 0:
                    del self._viewers[camera_id]
                    self._slots.pop(camera_id, None)
                    self._trails.pop(camera_id, None)

    def viewers(self) -> dict[str, int]:
        with self._lock:
            return dict(self._viewers)

    def offer(
        self,
        image: Tensor,
        result: FrameResult,
        counts: Mapping[str, Any],
        events: Sequence[Event] = (),
    ) -> Sequence[Event]:
        """Store a tracked frame of a watched camera; snapshot its events (track thread).

        Returns ``events`` with ``snapshot`` set for those that get one.
        """
        cid = result.frame.camera_id
        trails = self._update_trails(cid, result)
        if events and self.events is not None:
            alerts = self.rules_of(cid) if self.rules_of is not None else None
            events = self.events.record(image, result, events, alerts, trails)
        with self._lock:
            if cid not in self._viewers:
                return events
            self._slots[cid] = LiveFrame(
                image=image,
                result=result,
                trails=trails,
                counts=dict(counts),
                fps=(self.fps_of(cid) if self.fps_of is not None else None) or 0.0,
                time=time.time(),
            )
        return events

    def forget(self, camera_id: str) -> None:
        """A camera removed while running: drop its frame, trails and rate (viewers
        still connected see no new frame; the console ends their streams)."""
        with self._lock:
            self._slots.pop(camera_id, None)
            self._trails.pop(camera_id, None)

    def latest(self, camera_id: str) -> LiveFrame | None:
        return self._slots.get(camera_id)

    def _update_trails(
        self, camera_id: str, result: FrameResult
    ) -> dict[int, list[tuple[float, float]]]:
        trails = self._trails.get(camera_id)
        if trails is None:
            trails = self._trails[camera_id] = Trails(self.trail_length)
        return trails.update(result.instances)
