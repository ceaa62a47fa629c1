"""Bounded queues between stages, each with an explicit policy when full.

* ``CameraQueues``: one bounded queue per camera feeding the batcher. A live
  camera's queue drops its **oldest** frame when full (the newest frame is
  always the one worth segmenting; each drop is reported to ``on_drop``);
  a file source's queue **blocks** its producer (backpressure, no loss).
  ``take_batch`` collects up to ``max_batch`` frames round-robin over the
  cameras, waiting at most ``max_wait`` seconds to fill the batch.
* ``StageQueue``: a bounded FIFO between two stage threads that blocks the
  producer when full and carries an end-of-stream marker.
"""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from streamseg.types import Frame

__all__ = ["CameraQueues", "StageQueue"]

T = TypeVar("T")


@dataclasses.dataclass
class _CameraQueue:
    live: bool
    capacity: int
    frames: collections.deque[Frame] = dataclasses.field(default_factory=collections.deque)
    closed: bool = False
    dropped: int = 0


class CameraQueues:
    """Per-camera frame queues with one condition variable shared with the batcher.

    Args:
        on_drop: called with each frame a live queue dropped (outside the lock).
    """

    def __init__(self, *, on_drop: Callable[[Frame], None] | None = None) -> None:
        self._cond = threading.Condition()
        self._queues: dict[str, _CameraQueue] = {}
        self._order: list[str] = []
        self._next = 0
        self._on_drop = on_drop
        self._ended = False  # end(): no camera comes any more (a pipeline stopping)
        self._removing: set[str] = set()  # cameras being removed: their closing ends nothing
        self.last_fill_wait = 0.0  # seconds the last batch waited to fill

    def add_camera(self, camera_id: str, *, live: bool, capacity: int) -> None:
        with self._cond:
            old = self._queues.get(camera_id)
            if old is not None and not (old.closed and not old.frames):
                raise ValueError(f"camera {camera_id!r} already has a queue")
            self._queues[camera_id] = _CameraQueue(live=live, capacity=max(1, capacity))
            if old is None:
                self._order.append(camera_id)

    def put(self, frame: Frame, stop: threading.Event | None = None) -> bool:
        """Queue ``frame``; returns ``False`` if it was not queued (closed, or ``stop`` set
        while a file source waited for room)."""
        dropped: Frame | None = None
        with self._cond:
            q = self._queues[frame.camera_id]
            while not q.live and len(q.frames) >= q.capacity and not q.closed:
                if stop is not None and stop.is_set():
                    return False
                self._cond.wait(0.1)
            if q.closed:
                return False
            if len(q.frames) >= q.capacity:
                dropped = q.frames.popleft()
                q.dropped += 1
            q.frames.append(frame)
            self._cond.notify_all()
        if dropped is not None and self._on_drop is not None:
            self._on_drop(dropped)
        return True

    def removing(self, camera_id: str) -> None:
        """``camera_id`` is being removed (before its source stops): its queue closing
        does not end the stream, even when it was the last one."""
        with self._cond:
            self._removing.add(camera_id)

    def close_camera(self, camera_id: str) -> None:
        """No more frames from this camera; what is queued is still delivered."""
        with self._cond:
            q = self._queues.get(camera_id)
            if q is not None:
                q.closed = True
            self._cond.notify_all()

    def wait_drained(self, camera_id: str, timeout: float) -> bool:
        """Wait until a closed camera's queue is empty (its frames taken); ``True`` if it is."""
        deadline = time.monotonic() + timeout
        with self._cond:
            q = self._queues.get(camera_id)
            while q is not None and q.frames and time.monotonic() < deadline:
                self._cond.wait(0.05)
            return q is None or not q.frames

    def remove_camera(self, camera_id: str) -> bool:
        """Forget a removed camera's queue once it is closed and empty (``True`` then).

        With every camera removed the batcher waits for a new one: only
        ``end()`` or cameras that all ended by themselves end the stream.
        """
        with self._cond:
            q = self._queues.get(camera_id)
            if q is None or not q.closed or q.frames:
                return False
            del self._queues[camera_id]
            self._removing.discard(camera_id)
            at = self._order.index(camera_id)
            self._order.remove(camera_id)
            if self._next > at:
                self._next -= 1
            self._next = self._next % len(self._order) if self._order else 0
            self._cond.notify_all()
            return True

    def end(self) -> None:
        """No camera will be added any more: once every queue is closed and empty
        (or there is none), ``take_batch`` returns ``None``."""
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def close_all(self) -> None:
        with self._cond:
            for q in self._queues.values():
                q.closed = True
            self._cond.notify_all()

    def depths(self) -> dict[str, int]:
        with self._cond:
            return {cid: len(q.frames) for cid, q in self._queues.items()}

    def dropped(self) -> dict[str, int]:
        with self._cond:
            return {cid: q.dropped for cid, q in self._queues.items()}

    def take_batch(self, max_batch: int, max_wait: float) -> list[Frame] | None:
        """Up to ``max_batch`` frames, round-robin across cameras.

        Blocks until a frame is available; then waits up to ``max_wait``
        seconds for the batch to fill. Returns ``None`` once every camera is
        closed and every queue is empty (end of stream).
        """
        with self._cond:
            while not self._available():
                if self._finished():
                    return None
                self._cond.wait(0.5)
            start = time.monotonic()
            deadline = start + max_wait
            while self._available() < max_batch and self._can_grow():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self.last_fill_wait = time.monotonic() - start
            batch = self._pop_round_robin(max_batch)
            self._cond.notify_all()  # room for blocked file sources
            return batch

    def _available(self) -> int:
        return sum(len(q.frames) for q in self._queues.values())

    def _can_grow(self) -> bool:
        """Whether waiting can bring more frames (some open queue has room)."""
        return any(not q.closed and len(q.frames) < q.capacity for q in self._queues.values())

    def _finished(self) -> bool:
        kept = [q for cid, q in self._queues.items() if cid not in self._removing]
        if not kept:  # every camera removed (or being removed): wait for one, unless ending
            return self._ended and self._available() == 0
        return all(q.closed for q in kept) and self._available() == 0

    def _pop_round_robin(self, max_batch: int) -> list[Frame]:
        out: list[Frame] = []
        n = len(self._order)
        while len(out) < max_batch and self._available():
            for k in range(n):
                cid = self._order[(self._next + k) % n]
                q = self._queues[cid]
                if q.frames:
                    out.append(q.frames.popleft())
                    self._next = (self._next + k + 1) % n
                    break
        return out


class _End:
    """The end-of-stream marker."""


END = _End()


class StageQueue(Generic[T]):
    """A bounded FIFO between two stages; ``put`` blocks when full (backpressure)."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self._q: queue.Queue[T | _End] = queue.Queue(maxsize=max(1, capacity))

    def put(self, item: T) -> None:
        self._q.put(item)

    def close(self) -> None:
        """Mark the end of the stream (after the items already queued)."""
        self._q.put(END)

    def get(self, timeout: float | None = None) -> T | _End | None:
        """The next item, ``END``, or ``None`` on timeout."""
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_many(self, limit: int, timeout: float | None = None) -> tuple[list[T], bool]:
        """Up to ``limit`` items (waiting up to ``timeout`` for the first);
        the flag is ``True`` when the end marker was reached."""
        items: list[T] = []
        first = self.get(timeout)
        while first is not None:
            if isinstance(first, _End):
                return items, True
            items.append(first)
            if len(items) >= limit:
                break
            try:
                first = self._q.get_nowait()
            except queue.Empty:
                break
        return items, False

    def depth(self) -> int:
        return self._q.qsize()

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.put(item)
