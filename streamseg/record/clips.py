"""Clips around alerts while ``serve`` runs: the runtime hook.

The runtime feeds it two things (see ``docs/architecture.md``, "Recording
hooks"):

* every demuxed packet of every camera: ``clips.on_packet(camera_id, packet,
  stream)`` (from the ingest thread, before decoding);
* every alert: ``clips.on_events(events)`` (after the alert stage).

Alerts select by the ``record.clips`` filters (cameras, rules, kinds); the
clip's time is the alert's ``pts`` (stream seconds, the clock of
``Frame.pts`` and of the packets). Files go to ``record.dir/<camera>/``.

``record.retention`` (:mod:`streamseg.record.retention`) is enforced when
the hook is made (start-up) and whenever a clip is opened or finished. A
write that finds the disk full stops every camera's clips
(:mod:`streamseg.record.diskfull`): the clips being written are given up,
alerts meanwhile get none (``clips_missed``), :meth:`ClipHook.health` says
``disk_full`` and ``on_alert`` gets one ``disk_full`` event; packets keep
filling the pre-alert buffers, and clips resume once space is back.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamseg.record.config import RecordConfig
from streamseg.record.diskfull import DiskGuard
from streamseg.record.events import disk_full_event
from streamseg.record.files import RecordedFile
from streamseg.record.retention import MB, Removal, Retention, RetentionThread
from streamseg.record.segments import ClipRecorder
from streamseg.types import Event

__all__ = ["ClipHook"]

log = logging.getLogger("streamseg.record")


class ClipHook:
    """Writes a clip per alert (merging overlapping ones) for every camera.

    Args:
        config: the ``record:`` section; nothing happens unless
            ``config.clips.enabled``.
        remember: clips kept findable per camera, and in :meth:`files` (the
            newest). The console's event log keeps 1,000 alerts by default;
            older clips stay on disk, only the lookup forgets them
            (``record.retention`` deletes them).

    ``on_alert`` (set by the runtime) is given the one ``disk_full`` event
    of each stop for a full disk.
    """

    def __init__(self, *, config: RecordConfig, remember: int = 1000) -> None:
        self.config = config
        self.enabled = config.clips.enabled
        self.remember = remember
        r = config.retention
        self.retention = Retention(root=Path(config.dir), config=r)
        self.disk = DiskGuard(
            free_bytes=self.retention.free_bytes,
            resume_bytes=int(max(r.resume_free_mb, r.min_free_mb) * MB),
            retry_s=r.retry_s,
            make_room=self._make_room,
            on_full=self._on_full,
        )
        self.on_alert: Callable[[Event], None] | None = None
        self.removed: dict[str, tuple[int, int]] = {}  # reason -> (files, bytes) deleted
        self.clips_missed = 0  # alerts that got no clip: the disk was full
        self._recorders: dict[str, ClipRecorder] = {}
        self._lock = threading.Lock()
        # Finished clips of recorders replaced (the source reconnected or a file
        # looped: a new stream) or removed with their camera: their alerts
        # still find them.
        self._earlier: dict[str, collections.deque[RecordedFile]] = {}
        self.ignored_events = 0
        self._worker: RetentionThread | None = None
        if self.enabled:
            self._make_room()  # at start-up; then as clips start and end, off the camera threads
            self._worker = RetentionThread(self._make_room)

    def wants(self, event: Event) -> bool:
        """Whether ``event`` passes the ``record.clips`` filters."""
        c = self.config.clips
        return (
            (not c.cameras or event.camera_id in c.cameras)
            and (not c.rules or event.rule in c.rules)
            and (not c.kinds or event.kind in c.kinds)
        )

    def on_packet(self, camera_id: str, packet: Any, stream: Any) -> None:
        """One demuxed packet (``av.Packet``) of ``camera_id``'s video ``stream``."""
        if not self.enabled or (
            self.config.clips.cameras and camera_id not in self.config.clips.cameras
        ):
            return
        self.disk.writable()  # while stopped for a full disk: resumes once space is back
        with self._lock:
            rec = self._recorders.get(camera_id)
            if rec is None or rec.template is not stream:
                if rec is not None:  # the source reconnected: new codec context
                    self._retire(camera_id, rec)
                rec = self._recorders[camera_id] = self._recorder(camera_id, stream)
            self._write(camera_id, rec, functools.partial(rec.push, packet))

    def _write(self, camera_id: str, rec: ClipRecorder, step: Callable[[], None]) -> None:
        """Run ``step`` (a write of ``rec``); enforce retention when a clip opened or
        finished; on a full disk, stop recording (every open clip is given up)."""
        before = rec.open_path
        try:
            step()
        except OSError as exc:
            if not self.disk.failed(exc, camera_id):
                raise
            for r in self._recorders.values():
                r.abort()
            return
        if rec.open_path != before and self._worker is not None:
            self._worker.poke()

    def _make_room(self) -> list[Removal]:
        """``record.retention``: delete what is past its limits (never an open clip).
        Not under the hook's lock: listing many files must not hold up the cameras."""
        removed = self.retention.enforce(keep=self._open_paths)
        with self._lock:
            for r in removed:
                files, size = self.removed.get(r.reason, (0, 0))
                self.removed[r.reason] = (files + 1, size + r.size)
        return removed

    def _open_paths(self) -> list[Path]:
        with self._lock:
            return [r.open_path for r in self._recorders.values() if r.open_path is not None]

    def _on_full(self, camera_id: str, exc: OSError) -> None:
        if self.on_alert is None:
            return
        event = disk_full_event(
            camera_id=camera_id,
            directory=str(self.retention.root),
            free_bytes=self.retention.free_bytes(),
            error=str(exc),
        )
        try:
            self.on_alert(event)
        except Exception:
            log.exception("record: publishing the disk_full alert failed")

    def _recorder(self, camera_id: str, stream: Any) -> ClipRecorder:
        c = self.config.clips
        return ClipRecorder(
            out_dir=Path(self.config.dir) / camera_id,
            camera_id=camera_id,
            template=stream,
            before_s=c.before_s,
            after_s=c.after_s,
            max_s=c.max_s,
            container=self.config.container,
            remember=self.remember,
        )

    def on_events(self, events: Sequence[Event]) -> None:
        """Alerts from the alert stage; each wanted one opens or extends a clip."""
        if not self.enabled:
            return
        writable = self.disk.writable()
        with self._lock:
            for event in events:
                rec = self._recorders.get(event.camera_id)
                if rec is None or not self.wants(event):
                    self.ignored_events += 1
                    continue
                if not writable or self.disk.stopped:
                    self.clips_missed += 1
                    continue
                tag = f"{event.rule}_{event.kind}"
                self._write(event.camera_id, rec, functools.partial(rec.trigger, event.pts, tag))

    def remove_camera(self, camera_id: str) -> None:
        """A camera removed while running: finish its open clip and drop its recorder
        (a camera added again under the id gets a new one)."""
        with self._lock:
            rec = self._recorders.pop(camera_id, None)
            if rec is not None:
                self._retire(camera_id, rec)

    def _retire(self, camera_id: str, rec: ClipRecorder) -> None:
        """Finish ``rec``'s clips and keep them findable for ``camera_id``'s alerts."""
        earlier = self._earlier.setdefault(camera_id, collections.deque(maxlen=self.remember))
        try:
            earlier.extend(rec.close())
        except OSError as exc:
            if not self.disk.failed(exc, camera_id):
                raise
            rec.abort()
            earlier.extend(rec.files)

    def health(self, cameras: Sequence[str] = ()) -> dict[str, Any]:
        """``/readyz``'s ``recording``: the disk guard's ``state`` (``recording`` or
        ``disk_full``), ``since``, ``stops``, ``last_error``; ``free_mb`` of the
        filesystem, ``bytes`` kept per camera, files ``removed`` by retention
        (``{reason: {files, bytes}}``), ``clips_missed`` while the disk was full,
        and ``cameras``: each of ``cameras``'s recording (that state, or ``off``
        for a camera ``record.clips.cameras`` leaves out), read at the same time."""
        with self._lock:
            usage = dict(self.retention.usage)
            removed = {k: {"files": n, "bytes": b} for k, (n, b) in self.removed.items()}
            missed = self.clips_missed
        disk = self.disk.health()
        only = self.config.clips.cameras
        return {
            **disk,
            "cameras": {c: "off" if only and c not in only else disk["state"] for c in cameras},
            "dir": str(self.retention.root),
            "free_mb": round(self.retention.free_bytes() / MB, 3),
            "bytes": usage,
            "removed": removed,
            "clips_missed": missed,
        }

    def clip_for(self, camera_id: str, when: float | None) -> tuple[Path, bool] | None:
        """The clip of an alert of ``camera_id`` at stream time ``when`` (``Event.pts``).

        ``(path, finished)`` once the clip has opened (``finished`` false
        while it is written), else ``None`` (no clip: filtered out, no
        keyframe yet, or not due yet). After a reconnect (or a looping file's
        restart) the stream times begin again; the newest clip holding
        ``when`` is the answer.
        """
        if not self.enabled or when is None:
            return None
        with self._lock:
            rec = self._recorders.get(camera_id)
            found = rec.clip_at(when) if rec is not None else None
            for f in reversed(self._earlier.get(camera_id, ()) if found is None else ()):
                if f.start <= when <= f.start + f.duration:
                    return f.path, True
            return found

    def files(self) -> list[RecordedFile]:
        """Clips finished so far, all cameras (the newest ``remember`` of the
        cameras' replaced sources, then as many of their current ones)."""
        with self._lock:
            return self._files()

    def _files(self) -> list[RecordedFile]:
        earlier = [f for files in self._earlier.values() for f in files]
        return earlier + [f for r in self._recorders.values() for f in r.files]

    def close(self) -> list[RecordedFile]:
        """Finish open clips and enforce retention a last time; returns the clips
        remembered (:meth:`files` after it)."""
        with self._lock:
            for camera_id, rec in self._recorders.items():
                self._retire(camera_id, rec)
            self._recorders.clear()
        if self._worker is not None:
            self._worker.close()
            self._worker = None
            self._make_room()
        with self._lock:
            return self._files()
