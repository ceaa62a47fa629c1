"""Processes as /proc shows them: who a process's children are, and whether one has ended.

Linux only (the tests that use it run there): ``children(pid)`` reads every
process's parent from ``/proc/<pid>/stat``, so children started by any
thread count; ``ended(pid)`` waits for a process to be gone or a zombie
(ended, not reaped yet by its parent).
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["children", "ended"]


def _stat(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def children(pid: int) -> list[tuple[int, bytes]]:
    """``(pid, command line with NUL separators)`` of every child of ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat(stat.parent.name)
        if fields is None or int(fields[1]) != pid:
            continue
        try:
            out.append((int(stat.parent.name), (stat.parent / "cmdline").read_bytes()))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def ended(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` ends (is gone, or a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        fields = _stat(pid)
        if fields is None or fields[0] in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
