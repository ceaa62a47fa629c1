"""Entries of several streams handed out in the order they arrived, not stream by stream.

One ``XREAD`` of several streams answers stream by stream, up to ``COUNT``
entries each. ``ArrivalOrder`` keeps what was read per stream and hands out
the earliest head first, by a key that follows arrival:

1. the entry id's milliseconds (Redis gives every entry the time it was
   added; streams of one server share that clock);
2. within one millisecond (one write of the service carries a frame's
   detections and its alerts together): the time of the frame the message
   is about (``capture_time`` of a detections message, ``time`` of an
   alert, which is its frame's capture time), then detections before the
   alerts of the same frame;
3. then the stream's own order (the id's sequence number).

A stream whose last read came back full may hold more entries that belong
before the other streams' heads: while its queue is empty nothing is handed
out (``pop`` returns ``None``) and the caller reads again.

Each entry's JSON is parsed once, here; ``pop`` returns it with the entry.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from streamseg.client.events import ClientError, Entry

__all__ = ["ArrivalOrder"]

Key = tuple[int, float, int, int]


class ArrivalOrder:
    """Per-stream queues of read entries, merged by arrival (see the module docstring)."""

    def __init__(self) -> None:
        self._queues: dict[str, collections.deque[tuple[Key, Entry, dict[str, Any] | None]]] = {}
        self._more: set[str] = set()  # streams whose last read was full

    def add(self, stream: str, entries: Sequence[Entry], *, full: bool) -> None:
        """What one read returned for ``stream`` (``full``: as many as asked for)."""
        queue = self._queues.setdefault(stream, collections.deque())
        for entry in entries:
            message = _json_or_none(entry)
            queue.append((_key(entry, message), entry, message))
        if full:
            self._more.add(stream)
        else:
            self._more.discard(stream)

    def pop(self) -> tuple[Entry, dict[str, Any] | None] | None:
        """The next entry in arrival order and its JSON, or ``None`` (read more first)."""
        if any(not self._queues.get(s) for s in self._more):
            return None
        heads = [(q[0][0], s) for s, q in self._queues.items() if q]
        if not heads:
            return None
        stream = min(heads)[1]
        _key, entry, message = self._queues[stream].popleft()
        return entry, message

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def clear(self) -> None:
        self._queues.clear()
        self._more.clear()


def _key(entry: Entry, message: dict[str, Any] | None) -> Key:
    ms, _, seq = entry.id.partition("-")
    when, rank = 0.0, 0
    if message is not None:
        if message.get("type") == "alert":
            when, rank = _number(message.get("time")), 1
        else:
            when = _number(message.get("capture_time"))
    return (int(ms or 0), when, rank, int(seq or 0))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _json_or_none(entry: Entry) -> dict[str, Any] | None:
    try:
        return entry.message()
    except ClientError:
        return None
