"""The console's events timeline: recent alerts, each with a snapshot and its "why".

``EventLog.record(image, result, events, alerts)`` is called in the track
thread for a frame that raised alerts. It keeps each event (its
``Event.to_dict()`` plus an ``id`` and the rule's parameters) in memory and
queues its snapshot: the frame with the event's track (mask, box, trail)
and the rule's zone or line drawn, written as a JPEG by a background
thread (``snapshot`` thread; a full queue drops snapshots, never blocks).
Snapshots live under one folder, deleted oldest first beyond ``max_bytes``
or ``retention`` seconds.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from streamseg.console.overlay import OverlayInfo, render_jpeg
from streamseg.track.alerts import CameraAlerts
from streamseg.types import Event, FrameResult

__all__ = ["EventLog"]

log = logging.getLogger("streamseg.console")

SNAPSHOT_QUEUE = 32


@dataclasses.dataclass
class _Pending:
    path: Path
    image: Any
    result: FrameResult
    info: OverlayInfo
    camera_id: str


class EventLog:
    """Recent events with snapshots on disk.

    Args:
        folder: where snapshots are written (created).
        class_names: the model's class names, for labels.
        max_events: events kept in memory (the oldest go first).
        max_bytes: snapshots kept on disk, in bytes.
        retention: seconds a snapshot is kept.
        max_width / quality: snapshot size and JPEG quality.
    """

    def __init__(
        self,
        *,
        folder: Path,
        class_names: Sequence[str] = (),
        max_events: int = 1000,
        max_bytes: int = 200 * 2**20,
        retention: float = 24 * 3600.0,
        max_width: int = 640,
        quality: int = 80,
    ) -> None:
        self.folder = Path(folder).absolute()  # the published path must not depend on a cwd
        self.folder.mkdir(parents=True, exist_ok=True)
        self.class_names = tuple(class_names)
        self.max_bytes, self.retention = max_bytes, retention
        self.max_width, self.quality = max_width, quality
        self._events: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_events)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._files: collections.deque[tuple[float, Path, int]] = collections.deque()
        self._bytes = 0
        self._queue: queue.Queue[_Pending | None] = queue.Queue(SNAPSHOT_QUEUE)
        self.snapshots_dropped = 0
        # Called with (camera id, JPEG bytes) once each snapshot is written (e.g. to MQTT).
        self.on_snapshot: Callable[[str, bytes], None] | None = None
        self._thread = threading.Thread(target=self._write_loop, name="snapshot", daemon=True)
        self._thread.start()

    def record(
        self,
        image: Any,
        result: FrameResult,
        events: Sequence[Event],
        alerts: CameraAlerts | None,
        trails: Mapping[int, list[tuple[float, float]]],
    ) -> list[Event]:
        """Keep ``events`` (all of one frame) and queue one snapshot each.

        Returns the events with ``snapshot`` set to the file each snapshot
        will be written to (``None`` where it was dropped: queue full), so
        that the published alert names it before the file exists.
        """
        out = []
        for event in events:
            eid = next(self._ids)
            path = self.folder / f"{eid:08d}-{_safe(event.camera_id)}-{_safe(event.rule)}.jpg"
            info = OverlayInfo(
                class_names=self.class_names,
                alerts=_only(alerts, event),
                trails={event.track_id: trails.get(event.track_id, [])}
                if event.track_id is not None
                else {},
                status=f"{event.camera_id} {event.rule}: {event.kind}",
            )
            inst = result.instances
            if event.track_id is not None and inst.track_ids is not None:
                inst = inst[inst.track_ids == event.track_id]
            try:
                pending = _Pending(
                    path, image, FrameResult(result.frame, inst), info, event.camera_id
                )
                self._queue.put_nowait(pending)
                event = dataclasses.replace(event, snapshot=str(path))
            except queue.Full:
                self.snapshots_dropped += 1
            body = event.to_dict()
            body.pop("mask_rle", None)  # the snapshot shows it
            body.update(
                id=eid,
                snapshot=f"/api/events/{eid}/snapshot.jpg",
                snapshot_path=event.snapshot,
                rule_config=_rule_config(alerts, event.rule),
                path=[list(p) for p in trails.get(event.track_id or -1, [])],
            )
            with self._lock:
                self._events.append(body)
            out.append(event)
        return out

    def list(
        self,
        *,
        camera: str | None = None,
        rule: str | None = None,
        kind: str | None = None,
        label: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Events newest first, filtered by camera, rule, kind, class name and time (seconds)."""
        with self._lock:
            events = list(self._events)
        out = []
        for e in reversed(events):
            if camera is not None and e.get("camera_id") != camera:
                continue
            if rule is not None and e.get("rule") != rule:
                continue
            if kind is not None and e.get("kind") != kind:
                continue
            if label is not None and e.get("label_name") != label:
                continue
            if since is not None and e.get("time", 0) < since:
                continue
            if until is not None and e.get("time", 0) > until:
                continue
            out.append(e)
            if len(out) >= limit:
                break
        return out

    def get(self, event_id: int) -> dict[str, Any] | None:
        """The event with this id, while it is kept."""
        with self._lock:
            return next((dict(e) for e in self._events if e["id"] == event_id), None)

    def snapshot(self, event_id: int) -> Path | None:
        """The snapshot file of an event, once written and while kept."""
        path = next(self.folder.glob(f"{event_id:08d}-*.jpg"), None)
        return path if path is not None and path.is_file() else None

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                jpeg = render_jpeg(
                    item.image,
                    item.result.instances,
                    item.info,
                    quality=self.quality,
                    max_width=self.max_width,
                )
                item.path.write_bytes(jpeg)
                self._files.append((time.time(), item.path, len(jpeg)))
                self._bytes += len(jpeg)
                self._expire()
                if self.on_snapshot is not None:
                    self.on_snapshot(item.camera_id, jpeg)
            except Exception:
                log.exception("console: writing snapshot %s failed", item.path.name)

    def _expire(self) -> None:
        old = time.time() - self.retention
        while self._files and (self._bytes > self.max_bytes or self._files[0][0] < old):
            _t, path, size = self._files.popleft()
            self._bytes -= size
            path.unlink(missing_ok=True)


def _only(alerts: CameraAlerts | None, event: Event) -> CameraAlerts | None:
    """The camera's geometry reduced to the event's zone or line."""
    if alerts is None:
        return None
    zones = {k: v for k, v in alerts.zones.items() if k == event.zone}
    lines = {k: v for k, v in alerts.lines.items() if k == event.line}
    return CameraAlerts(coordinates=alerts.coordinates, zones=zones, lines=lines)


def _rule_config(alerts: CameraAlerts | None, name: str) -> dict[str, Any] | None:
    if alerts is None:
        return None
    for rule in alerts.rules:
        if rule.name == name:
            return dict(rule.model_dump(mode="json"))
    return None


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:40]
