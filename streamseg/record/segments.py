"""Recording raw camera footage without re-encoding: segments and alert clips.

Packets demuxed from a camera are copied into MP4 (fragmented: a crash leaves
a playable file) or Matroska containers as they are; nothing is decoded or
encoded. Two writers share one packet type:

* :class:`SegmentWriter` cuts a stream into files of about ``segment_s``
  seconds, each starting at a keyframe (``streamseg record``);
* :class:`ClipRecorder` keeps a ring buffer of the last ``before_s`` seconds
  (from a keyframe on) and, when an alert comes, writes that plus the next
  ``after_s`` seconds; alerts inside an open clip extend it up to ``max_s``
  (clips around alerts while ``serve`` runs; see :mod:`streamseg.record.clips`).

Times are stream seconds (``pts * time_base``), the clock of ``Frame.pts``.
"""

from __future__ import annotations

import collections
import logging
import time
from pathlib import Path
from typing import Any

from streamseg.record.files import (
    MUXER_OPTIONS,
    DetachedStream,
    Output,
    RecordedFile,
    StoredPacket,
    safe_name,
    stamp,
)

__all__ = ["ClipRecorder", "SegmentWriter"]

log = logging.getLogger("streamseg.record")


class SegmentWriter:
    """Cuts one camera's packets into files of about ``segment_s`` seconds.

    Args:
        out_dir: files go to ``out_dir/<camera>_<UTC start>_<n>.<container>``.
        camera_id: names the files.
        template: the input ``av.VideoStream`` (codec parameters are copied).
        container: ``mp4`` or ``mkv``.
        segment_s: a new file starts at the first keyframe this many seconds
            (stream time) after the current file's start.

    Packets before the first keyframe are skipped (nothing could decode them).
    """

    def __init__(
        self,
        *,
        out_dir: str | Path,
        camera_id: str,
        template: Any,
        container: str = "mp4",
        segment_s: float = 60.0,
    ) -> None:
        if container not in MUXER_OPTIONS:
            raise ValueError(f"container must be mp4 or mkv, not {container!r}")
        self.out_dir = Path(out_dir)
        self.camera_id = camera_id
        self.template = template
        self.container = container
        self.segment_s = segment_s
        self.files: list[RecordedFile] = []
        self.skipped = 0
        self._current: Output | None = None

    def write(self, packet: Any) -> None:
        """Add one packet (``av.Packet`` or :class:`StoredPacket`)."""
        sp = packet if isinstance(packet, StoredPacket) else StoredPacket.from_av(packet)
        if not sp.data:
            return
        cur = self._current
        if cur is not None and sp.keyframe and sp.time - cur.start >= self.segment_s:
            self.files.append(cur.close())
            cur = self._current = None
        if cur is None:
            if not sp.keyframe:
                self.skipped += 1
                return
            name = f"{safe_name(self.camera_id)}_{stamp(time.time())}_{len(self.files):04d}"
            cur = self._current = Output(
                self.out_dir / f"{name}.{self.container}", self.template, self.container, sp
            )
            log.info("recording %s", cur.path)
        cur.write(sp)

    @property
    def open_path(self) -> Path | None:
        """The file being written, if any."""
        return self._current.path if self._current is not None else None

    def abort(self) -> None:
        """Give the open file up (a write failed); the next keyframe starts a new one."""
        if self._current is not None:
            self._current.abort()
            self._current = None

    def close(self) -> list[RecordedFile]:
        """Finish the open file; returns every file written."""
        if self._current is not None:
            self.files.append(self._current.close())
            self._current = None
        return self.files


class ClipRecorder:
    """Clips of one camera around alert times, from a ring buffer of packets.

    Args:
        out_dir: clips go to ``out_dir/<camera>_<UTC alert time>_<tag>.<container>``.
        camera_id: the camera.
        template: the input ``av.VideoStream``.
        before_s / after_s: seconds kept before and after an alert.
        max_s: an extended clip never grows past this length.
        container: ``mp4`` or ``mkv``.
        remember: finished clips kept in :attr:`files` (the newest; a service that
            runs for months writes more than it needs to look up).

    Call :meth:`push` with every packet of the camera and :meth:`trigger` when
    an alert happens; the clip is finished once a packet ``after_s`` past the
    (last) alert arrives, or on :meth:`close`.
    """

    def __init__(
        self,
        *,
        out_dir: str | Path,
        camera_id: str,
        template: Any,
        before_s: float = 5.0,
        after_s: float = 5.0,
        max_s: float = 120.0,
        container: str = "mp4",
        remember: int = 1000,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.camera_id = camera_id
        self.template = template
        self._codec = DetachedStream(template)
        self.before_s, self.after_s, self.max_s = before_s, after_s, max_s
        self.container = container
        self.files: collections.deque[RecordedFile] = collections.deque(maxlen=remember)
        self._ring: collections.deque[StoredPacket] = collections.deque()
        self._open: Output | None = None
        self._until = 0.0
        self._pending: list[tuple[float, str]] = []

    @property
    def newest(self) -> float | None:
        """Stream time of the newest packet seen (seconds), or ``None``."""
        return self._ring[-1].time if self._ring else None

    def push(self, packet: Any) -> None:
        """Add one packet (``av.Packet`` or :class:`StoredPacket`) of the camera."""
        sp = packet if isinstance(packet, StoredPacket) else StoredPacket.from_av(packet)
        if not sp.data:
            return
        self._ring.append(sp)
        self._trim()
        if self._open is not None:
            # Cut in decode order (every packet written stays decodable), at the
            # decode time of the frame shown at `_until`.
            if sp.decode_time + self._open.delay >= self._until:
                self._finish()
            else:
                self._open.write(sp)
        for when, tag in self._take_due(sp.time):
            self._start_or_extend(when, tag)

    def trigger(self, when: float | None = None, tag: str = "alert") -> None:
        """An alert at stream time ``when`` (default: the newest packet's time).

        The clip opens as soon as the packet at ``when`` has been seen (the
        alert may arrive a little before its packets when inference is fast).
        """
        when = self.newest if when is None else when
        if when is None:
            return
        self._pending.append((when, tag))
        newest = self.newest
        if newest is not None:
            for due, due_tag in self._take_due(newest):
                self._start_or_extend(due, due_tag)

    def _take_due(self, now: float) -> list[tuple[float, str]]:
        due = [p for p in self._pending if p[0] <= now]
        self._pending = [p for p in self._pending if p[0] > now]
        return due

    def _start_or_extend(self, when: float, tag: str) -> None:
        if self._open is not None:
            self._until = min(max(self._until, when + self.after_s), self._open.start + self.max_s)
            return
        start_from = when - self.before_s
        packets = list(self._ring)
        first = max(
            (i for i, p in enumerate(packets) if p.keyframe and p.time <= start_from),
            default=next((i for i, p in enumerate(packets) if p.keyframe), None),
        )
        if first is None:
            log.warning(
                "%s: no keyframe buffered yet; alert at %.2fs gets no clip", self.camera_id, when
            )
            return
        name = f"{safe_name(self.camera_id)}_{stamp(time.time())}_{safe_name(tag)}"
        path, n = self.out_dir / f"{name}.{self.container}", 1
        while path.exists():  # a clip opened in the same millisecond (one ended, the next began)
            path, n = self.out_dir / f"{name}_{n}.{self.container}", n + 1
        out = Output(
            path,
            self._codec.stream,
            self.container,
            packets[first],
        )
        try:
            for p in packets[first:]:
                out.write(p)
        except BaseException:
            out.abort()
            raise
        self._open = out
        self._until = min(when + self.after_s, out.start + self.max_s)
        log.info("clip %s (alert at %.2fs)", out.path, when)

    def _trim(self) -> None:
        """Keep packets from the newest keyframe at least ``before_s`` old."""
        limit = self._ring[-1].time - self.before_s
        # Older alerts still pending need their pre-roll too.
        if self._pending:
            limit = min(limit, min(w for w, _ in self._pending) - self.before_s)
        while len(self._ring) > 1:
            later_key = next((i for i, p in enumerate(self._ring) if i > 0 and p.keyframe), None)
            if later_key is None or self._ring[later_key].time > limit:
                break
            for _ in range(later_key):
                self._ring.popleft()

    def clip_at(self, when: float) -> tuple[Path, bool] | None:
        """The clip whose span holds stream time ``when``: ``(path, finished)``, or ``None``.

        An alert's clip spans its time, so this finds the file an alert at
        ``when`` went into (``finished`` false while it is being written). A
        finished clip wins over the open one: the next clip's pre-roll may
        overlap the end of the last, and an alert once served its finished
        clip must not become "still being recorded" again.
        """
        for f in reversed(self.files):
            if f.start <= when <= f.start + f.duration:
                return f.path, True
        if self._open is not None and self._open.start <= when <= self._until:
            return self._open.path, False
        return None

    @property
    def open_path(self) -> Path | None:
        """The clip being written, if any."""
        return self._open.path if self._open is not None else None

    def abort(self) -> None:
        """Give up the clip being written (a write failed) and the alerts waiting."""
        if self._open is not None:
            self._open.abort()
            self._open = None
        self._pending.clear()

    def _finish(self) -> None:
        assert self._open is not None
        self.files.append(self._open.close())
        self._open = None

    def close(self) -> list[RecordedFile]:
        """Finish an open clip (shorter than asked); returns the clips remembered."""
        if self._open is not None:
            self._finish()
        self._pending.clear()
        return list(self.files)
