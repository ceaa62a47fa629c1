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

import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from streamseg.record.config import RetentionConfig

__all__ = ["RECORDING_SUFFIXES", "Removal", "Retention", "StoredFile"]

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

    def enforce(self, *, keep: Collection[Path] = ()) -> list[Removal]:
        """Delete what is past the limits, oldest first; returns what was deleted."""
        c = self.config
        kept = {Path(p).absolute() for p in keep}
        files = self.files()
        removable = [f for f in files if f.path.absolute() not in kept]
        removed: list[Removal] = []

        def drop(f: StoredFile, reason: str) -> None:
            removable.remove(f)
            files.remove(f)
            if _unlink(f.path):
                removed.append(Removal(f.path, f.camera, f.size, reason))

        if c.max_age_hours is not None:
            oldest = self.clock() - c.max_age_hours * 3600
            for f in [f for f in removable if f.mtime < oldest]:
                drop(f, "age")
        if c.camera_max_mb is not None:
            for camera in {f.camera for f in files}:
                while _total(files, camera) > c.camera_max_mb * MB:
                    oldest_of = next((f for f in removable if f.camera == camera), None)
                    if oldest_of is None:
                        break
                    drop(oldest_of, "camera_size")
        if c.max_mb is not None:
            while _total(files) > c.max_mb * MB and removable:
                drop(removable[0], "total_size")
        if c.min_free_mb > 0:
            while removable and self.free_bytes() < c.min_free_mb * MB:
                drop(removable[0], "free_space")
        self.usage = {cam: _total(files, cam) for cam in sorted({f.camera for f in files})}
        for r in removed:
            log.info("record: deleted %s (%s, %d bytes)", r.path, r.reason, r.size)
        return removed


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
