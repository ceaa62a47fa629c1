"""Recording on a full disk: it stops, says so once, and resumes when space is back.

A write that fails with ``ENOSPC`` (or ``EDQUOT``, a quota) goes to
:meth:`DiskGuard.failed`: the guard's state becomes ``disk_full``, the file
being written is given up by its writer, and ``on_full`` is called once
(the service publishes one ``disk_full`` alert and counts it). While
stopped, :meth:`DiskGuard.writable` says no; at most every ``retry_s``
seconds it first lets ``make_room`` run (retention may delete old
recordings) and then looks at the free space: from ``resume_bytes`` free
on, recording resumes (``on_resume``). Nothing else (decoding, inference,
publishing) is affected.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DISK_FULL_ERRNOS", "DiskGuard", "is_disk_full"]

log = logging.getLogger("streamseg.record")

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the filesystem (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


class DiskGuard:
    """Whether recording may write now (thread-safe).

    Args:
        free_bytes: the filesystem's free bytes now.
        resume_bytes: free bytes needed to resume after a full disk.
        retry_s: seconds between looks at the free space while stopped.
        make_room: called before each look (retention), or ``None``.
        on_full: ``(camera, error)``, once per stop.
        on_resume: ``()``, once per resume.
        clock: monotonic seconds (tests move it).
    """

    def __init__(
        self,
        *,
        free_bytes: Callable[[], int],
        resume_bytes: int,
        retry_s: float = 5.0,
        make_room: Callable[[], object] | None = None,
        on_full: Callable[[str, OSError], None] | None = None,
        on_resume: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free_bytes, self.resume_bytes, self.retry_s = free_bytes, resume_bytes, retry_s
        self.make_room, self.on_full, self.on_resume = make_room, on_full, on_resume
        self.clock = clock
        self.state = "recording"
        self.since = time.time()  # unix seconds of the last change
        self.stops = 0  # times a full disk stopped recording
        self.last_error: str | None = None
        self.camera: str | None = None  # whose write found the disk full
        self._next_look = 0.0
        self._lock = threading.Lock()

    @property
    def stopped(self) -> bool:
        return self.state == "disk_full"

    def failed(self, exc: BaseException, camera: str) -> bool:
        """A write for ``camera`` raised ``exc``; ``True`` when it was a full disk
        (recording is stopped now: the caller gives its file up), else ``False``."""
        if not is_disk_full(exc):
            return False
        assert isinstance(exc, OSError)
        with self._lock:
            if self.stopped:
                return True
            self.state, self.since, self.camera = "disk_full", time.time(), camera
            self.stops += 1
            self.last_error = str(exc)
            self._next_look = self.clock() + self.retry_s
        log.error(
            "record: the disk is full (%s); recording stops until %.1f MiB are free",
            exc,
            self.resume_bytes / 2**20,
        )
        if self.on_full is not None:
            self.on_full(camera, exc)
        return True

    def writable(self) -> bool:
        """Whether to record now; while stopped, resumes once space is back."""
        with self._lock:
            if not self.stopped:
                return True
            now = self.clock()
            if now < self._next_look:
                return False
            self._next_look = now + self.retry_s
        if self.make_room is not None:
            try:
                self.make_room()
            except Exception:
                log.exception("record: making room failed")
        free = self.free_bytes()
        if free < self.resume_bytes:
            return False
        with self._lock:
            if not self.stopped:
                return True
            self.state, self.since = "recording", time.time()
        log.warning("record: %.0f MiB free again; recording resumes", free / 2**20)
        if self.on_resume is not None:
            self.on_resume()
        return True

    def health(self) -> dict[str, Any]:
        """``{state, since, stops, last_error}``: ``state`` is ``recording`` or ``disk_full``."""
        with self._lock:
            return {
                "state": self.state,
                "since": self.since,
                "stops": self.stops,
                "last_error": self.last_error,
            }
