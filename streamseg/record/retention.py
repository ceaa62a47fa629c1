"""``record.retention``: recordings deleted oldest first, by age and by size.

Recordings are the ``.mp4``/``.mkv`` files under ``record.dir/<camera>/``
(clips around alerts, segments of ``streamseg record``); the folder a file
is in names its camera. :meth:`Retention.enforce` deletes, oldest first by
modification time, in this order:

1. files older than ``max_age_hours`` (reason ``age``);
2. each camera's oldest while the camera holds over ``camera_max_mb``
   (reason ``camera_size``);
3. the oldest of all while all cameras hold over ``max_mb`` (``total_size``);
4. the oldest of all while the filesystem has under ``min_free_mb`` free
   (``free_space``).

Files being written (``keep``) are never deleted, but their size counts.
Other files in the folders are neither counted nor touched.

Example::

    retention = Retention(root=Path("recordings"), config=RetentionConfig(max_mb=500))
    for removal in retention.enforce():
        print(removal.reason, removal.path)
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from streamseg.record.config import RetentionConfig

__all__ = ["RECORDING_SUFFIXES", "Removal", "Retention", "RetentionThread", "StoredFile"]

log = logging.getLogger("streamseg.record")

RECORDING_SUFFIXES = (".mp4", ".mkv")
MB = 2**20


@dataclasses.dataclass(frozen=True)
class StoredFile:
    """One recording on disk: its camera (folder name), size in bytes, mtime (unix s)."""

    path: Path
    camera: str
    size: int
    mtime: float


@dataclasses.dataclass(frozen=True)
class Removal:
    """A recording :meth:`Retention.enforce` deleted, and why (``age``,
    ``camera_size``, ``total_size`` or ``free_space``)."""

    path: Path
    camera: str
    size: int
    reason: str


class Retention:
    """Keeps the recordings under ``root`` within ``config``'s limits.

    Args:
        root: ``record.dir``; recordings are in its sub-folders, one per camera.
        config: the limits (``record.retention``).
        flat: the recordings lie in ``root`` itself, all of one camera
            (``root``'s name): ``streamseg record --out DIR`` outside ``record.dir``.
        clock: unix seconds now (tests move it).
    """

    def __init__(
        self,
        *,
        root: Path,
        config: RetentionConfig,
        flat: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root, self.config, self.flat, self.clock = Path(root), config, flat, clock
        self.usage: dict[str, int] = {}  # bytes per camera at the last enforce()

    def files(self) -> list[StoredFile]:
        """Every recording, oldest first."""
        folders = [(self.root.name, self.root)] if self.flat else _subfolders(self.root)
        found = [f for camera, folder in folders for f in _recordings(camera, folder)]
        return sorted(found, key=lambda f: (f.mtime, str(f.path)))

    def free_bytes(self) -> int:
        """Free bytes of the filesystem that holds ``root`` (its nearest existing folder)."""
        folder = self.root
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return shutil.disk_usage(folder).free

    def enforce(
        self, *, keep: Collection[Path] | Callable[[], Collection[Path]] = ()
    ) -> list[Removal]:
        """Delete what is past the limits, oldest first; returns what was deleted.

        ``keep``: the files being written, or a function that names them; it
        is called once the files are listed, so that a file opened while they
        are listed is either not listed or named.

        One pass over the files per limit (sorted once, oldest first): 10,000
        recordings take about 0.1 s of CPU, nearly all of it listing them.
        """
        c = self.config
        files = self.files()
        kept = {(Path(p).parent.name, Path(p).name) for p in (keep() if callable(keep) else keep)}
        candidates = [f for f in files if (f.camera, f.path.name) not in kept]
        sizes: collections.Counter[str] = collections.Counter()
        for f in files:
            sizes[f.camera] += f.size
        gone: set[Path] = set()
        removed: list[Removal] = []

        def drop(f: StoredFile, reason: str) -> None:
            gone.add(f.path)
            sizes[f.camera] -= f.size
            if _unlink(f.path):
                removed.append(Removal(f.path, f.camera, f.size, reason))

        if c.max_age_hours is not None:
            oldest = self.clock() - c.max_age_hours * 3600
            for f in itertools.takewhile(lambda f: f.mtime < oldest, candidates):
                drop(f, "age")
        left = [f for f in candidates if f.path not in gone]
        if c.camera_max_mb is not None:
            for f in left:
                if sizes[f.camera] > c.camera_max_mb * MB:
                    drop(f, "camera_size")
            left = [f for f in left if f.path not in gone]
        if c.max_mb is not None:
            most = c.max_mb * MB
            for f in itertools.takewhile(lambda _f: sizes.total() > most, left):
                drop(f, "total_size")
            left = [f for f in left if f.path not in gone]
        if c.min_free_mb > 0:
            for f in itertools.takewhile(lambda _f: self.free_bytes() < c.min_free_mb * MB, left):
                drop(f, "free_space")
        self.usage = {cam: sizes[cam] for cam in sorted(sizes)}
        for r in removed:
            log.info("record: deleted %s (%s, %d bytes)", r.path, r.reason, r.size)
        return removed


class RetentionThread:
    """Runs ``make_room`` in thread ``record-retention``: when poked (a
    recording started or ended) and every ``interval`` seconds (files age out
    without writes too), so that listing many files never holds up a camera."""

    def __init__(self, make_room: Callable[[], object], *, interval: float = 60.0) -> None:
        self.make_room, self.interval = make_room, interval
        self._poke, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="record-retention", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._poke.set()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._poke.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._poke.wait(self.interval)
            self._poke.clear()
            if self._stop.is_set():
                return
            try:
                self.make_room()
            except Exception:
                log.exception("record: retention failed")


def _subfolders(root: Path) -> list[tuple[str, Path]]:
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    return [(e.name, Path(e.path)) for e in entries if e.is_dir(follow_symlinks=False)]


def _recordings(camera: str, folder: Path) -> Iterable[StoredFile]:
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for e in entries:
        if not e.name.endswith(RECORDING_SUFFIXES) or not e.is_file(follow_symlinks=False):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:  # deleted meanwhile
            continue
        yield StoredFile(Path(e.path), camera, st.st_size, st.st_mtime)


def _total(files: Iterable[StoredFile], camera: str | None = None) -> int:
    return sum(f.size for f in files if camera is None or f.camera == camera)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("record: cannot delete %s: %s", path, exc)
        return False
    return True
