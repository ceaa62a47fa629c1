"""The running service as the console sees it (``streamseg.console.ConsoleBackend``).

:class:`ServiceConsole` is the console's part of ``serve``: it owns the live
view, the alert snapshots' log (and the temporary folder it writes to), and
the configuration as the console changed it while running (alert rules,
cameras). It asks the service only what it is given: the cameras served
here (``runtime.camera_changes.ServedCameras``), ``/readyz``'s readiness and
the fleet; the pipeline and the hooks built with it are attached once the
model is loaded (until then the configured values stand). In a fleet it
lists the fleet's other cameras too (``remote``, with their ``owner``), and
the console reaches the other workers through ``streamseg.fleet.view``.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamseg.ingest.config import CameraConfig
from streamseg.redact import redact_text, redact_url
from streamseg.telemetry.counters import FRAME_COUNTERS
from streamseg.track.alerts import AlertsConfig

if TYPE_CHECKING:
    from streamseg.config.http import HttpConfig
    from streamseg.config.pipeline import PipelineConfig
    from streamseg.configbase.errors import ConfigIssue
    from streamseg.console.events import EventLog
    from streamseg.fleet.worker import FleetWorker
    from streamseg.record.clips import ClipHook
    from streamseg.runtime.camera_changes import ServedCameras
    from streamseg.runtime.hotswap import SwapController
    from streamseg.runtime.pipeline import Pipeline

__all__ = ["ServiceConsole", "console_address", "event_log"]

log = logging.getLogger("streamseg.runtime")

# ``/readyz``'s ``(ready, details)`` (``Service.readiness``).
Readiness = Callable[[], "tuple[bool, dict[str, Any]]"]


@dataclasses.dataclass(frozen=True)
class _Running:
    """What exists once the model is loaded."""

    pipeline: Pipeline
    swap: SwapController | None
    clips: ClipHook | None
    region_classes: tuple[str, ...] | None


class ServiceConsole:
    """``ConsoleBackend`` over the running service, its live view and snapshot log.

    Args:
        config: the configuration ``serve`` started with; ``config`` is kept
            as the console changes it (a restart would use it).
        cameras: the cameras served here.
        readiness: ``/readyz``'s ``(ready, details)``.
        fleet: this worker's part of a fleet (cameras are added and removed
            through it; its other cameras are listed with their owner).
        pipeline_path: the file ``config`` came from, where the editor saves
            changes (``None``: the console cannot change anything).
    """

    def __init__(
        self,
        config: PipelineConfig,
        *,
        cameras: ServedCameras,
        readiness: Readiness,
        fleet: FleetWorker | None = None,
        pipeline_path: str | None = None,
    ) -> None:
        from streamseg.console.editor import PipelineEditor
        from streamseg.console.live import LiveView
        from streamseg.console.server import Console

        self.config = config
        self._served, self._readiness, self._fleet = cameras, readiness, fleet
        self._lock = threading.Lock()
        self._running: _Running | None = None
        h = config.http
        self.events: EventLog | None = None  # the alert snapshots' log (http.snapshots)
        self._snapshot_tmp: tempfile.TemporaryDirectory[str] | None = None  # removed at close
        if h.snapshots:
            self.events, self._snapshot_tmp = event_log(h)
        self.live = LiveView(
            trail_length=h.trail_length,
            events=self.events,
            rules_of=lambda cid: self.alerts().cameras.get(cid),
            fps_of=self.fps,
        )
        editor = PipelineEditor(pipeline_path, checks=self.live_issues) if pipeline_path else None
        if fleet is not None:  # the other workers' consoles fetch this one's live views here
            fleet.advertise(console_address(h, fleet.config.console_url))
        console = Console(
            backend=self,
            live=self.live,
            http=h,
            editor=editor,
            events=self.events,
            fleet=fleet.view if fleet is not None else None,
        )
        self.install: Callable[[Any], None] = console.install  # the web server's setup(app)

    def attach(
        self,
        pipeline: Pipeline,
        *,
        swap: SwapController | None,
        clips: ClipHook | None,
        region_classes: tuple[str, ...] | None,
    ) -> None:
        """Answer from ``pipeline`` (and the hooks built with it) from now on."""
        if self.events is not None:
            self.events.class_names = tuple(pipeline.segmenter.class_names)
        self._running = _Running(pipeline, swap, clips, region_classes)

    def close(self) -> None:
        """Close the snapshot log and remove its temporary folder."""
        if self.events is not None:
            self.events.close()
        if self._snapshot_tmp is not None:
            self._snapshot_tmp.cleanup()

    @property
    def _pipeline(self) -> Pipeline | None:
        r = self._running
        return r.pipeline if r is not None else None

    # -- ConsoleBackend ------------------------------------------------------------
    def cameras(self) -> dict[str, dict[str, Any]]:
        _ready, details = self._readiness()
        out: dict[str, dict[str, Any]] = {}
        for cam in self._served.cameras:
            info = dict(details["cameras"].get(cam.id, {"state": "connecting"}))
            counts = info.get("counts", {})
            info.update(
                id=cam.id,
                url=redact_url(cam.url),
                fps=self.fps(cam.id),
                # the frame counters, named as streamseg.telemetry.counters says
                **{word: counts.get(word, 0) for word in FRAME_COUNTERS},
            )
            out[cam.id] = info
        fleet = self._fleet
        if fleet is not None:  # the fleet's other cameras, with their owner
            for info in out.values():
                info.update(owner=fleet.name, remote=False)
            for cid, row in fleet.remote_cameras().items():
                empty = {**dict.fromkeys(FRAME_COUNTERS, 0), "fps": None, "reconnects": 0}
                out.setdefault(cid, {**empty, "stalls": 0, **row, "remote": True})
        return out

    def status(self) -> dict[str, Any]:
        _ready, details = self._readiness()
        m = self.config.model
        model = {
            **details["model"],
            "backend": m.backend,
            "precision": m.precision,
            "device": m.device,
            "weights": m.weights,
            "hot_swap": m.hot_swap,
            "last_swap": None,
        }
        swap = self._running.swap if self._running is not None else None
        last = swap.last() if swap is not None else None
        if swap is not None and last is not None:
            model["last_swap"] = {
                "weights": last.request.weights,
                "ok": last.ok,
                "error": None if last.error is None else redact_text(last.error),
                "source": last.request.source,
                "time": last.finished,
                "load_s": round(last.load_s, 3),
            }
            ok = [o for o in swap.outcomes if o.ok]
            if ok:  # what runs now
                model["weights"] = ok[-1].request.weights
        return {
            "sinks": details["sinks"],
            "model": model,
            "stopping": details["stopping"],
            "degraded": details["degraded"],
        }

    def class_names(self) -> Sequence[str]:
        p = self._pipeline
        if p is not None:
            return tuple(p.segmenter.class_names)
        names = self.config.model.class_names
        return tuple(names) if names else ("__background__",)

    def alerts(self) -> AlertsConfig:
        return self.config.alerts

    def apply_alerts(self, alerts: AlertsConfig) -> None:
        with self._lock:
            p = self._pipeline
            if p is not None:
                p.tracker.set_alerts(alerts)  # PassThrough: ValueError, no rules can run
            self.config = self.config.model_copy(update={"alerts": alerts})

    def add_camera(self, camera: CameraConfig) -> None:
        """Serve one more camera (in a fleet: add it to the fleet's list, its owner starts it)."""
        fleet = self._fleet
        (fleet.add_camera if fleet is not None else self._served.start_camera)(camera)
        self._sync_cameras()

    def replace_camera(self, camera: CameraConfig) -> None:
        try:
            self._served.replace_camera(camera)
        finally:  # what runs, whether the change was made or undone
            self._sync_cameras()

    def remove_camera(self, camera_id: str) -> None:
        """Stop serving one camera (in a fleet: remove it from the fleet's list)."""
        fleet = self._fleet
        (fleet.remove_camera if fleet is not None else self._served.stop_camera)(camera_id)
        self._sync_cameras()

    def _sync_cameras(self) -> None:
        """Keep ``config.cameras`` what runs (a restart of the pipeline would use it)."""
        with self._lock:
            self.config = self.config.model_copy(update={"cameras": self._served.cameras})

    def clip_for(self, camera_id: str, pts: float | None) -> tuple[Path, bool] | None:
        clips = self._running.clips if self._running is not None else None
        return clips.clip_for(camera_id, pts) if clips is not None else None

    def frame_size(self, camera_id: str) -> tuple[int, int] | None:
        p = self._pipeline
        return p.frame_size(camera_id) if p is not None else None

    def fps(self, camera_id: str) -> float | None:
        """The camera's frames per second: ``PipelineStats.fps``, the one figure the
        status line, the tiles, the live badges and the charts show."""
        p = self._pipeline
        fps = p.stats.fps(camera_id) if p is not None else None
        return None if fps is None else round(fps, 2)

    def live_issues(self, config: PipelineConfig) -> list[ConfigIssue]:
        """What a change to ``config`` would meet in the running service, found before
        it is applied: the same checks as start-up (``streamseg.cli.startup``) for the
        cameras it adds or changes (source parameters, files, devices, decoders), and
        every rule against the running model's classes
        (``streamseg.track.rules.checks``; while the model is being built, the
        classes its config or checkpoint names)."""
        from streamseg.ingest.checks import camera_issues
        from streamseg.runtime.factory import known_class_names
        from streamseg.track.rules.checks import rule_issues

        running = {c.id: c for c in self._served.cameras}
        issues = [
            issue
            for i, cam in enumerate(config.cameras)
            if running.get(cam.id) != cam
            for issue in camera_issues(cam, i)
        ]
        if not (config.tracking.enabled or config.alerts.enabled):
            return issues
        r = self._running
        if r is not None:
            classes = r.pipeline.segmenter.class_names
            issues += rule_issues(config.alerts, classes, r.region_classes)
        else:  # the model is still being built: what the config or checkpoint says of it
            names = known_class_names(config.model)
            issues += rule_issues(config.alerts, names) if names is not None else []
        return issues


def console_address(h: HttpConfig, url: str | None) -> str | None:
    """This worker's console as other workers reach it: ``url`` (``fleet.console_url``),
    else ``http://HOST:PORT`` of the ``http:`` section (the host name for a wildcard
    host; ``None`` for ``port: 0``, known only once bound)."""
    if url is not None:
        return url.rstrip("/")
    if h.port == 0:
        return None
    host = socket.gethostname() if h.host in ("0.0.0.0", "::", "") else h.host
    return f"http://[{host}]:{h.port}" if ":" in host else f"http://{host}:{h.port}"


def event_log(h: HttpConfig) -> tuple[EventLog, tempfile.TemporaryDirectory[str] | None]:
    """The alert snapshots' log (``http.snapshots``), and the temporary folder it
    writes to when ``http.snapshot_dir`` names none (removed at exit)."""
    from streamseg.console.events import EventLog

    tmp = None
    if h.snapshot_dir is not None:
        folder = Path(h.snapshot_dir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="streamseg-snapshots-")
        folder = Path(tmp.name)
    log.info("console: alert snapshots in %s", folder)
    events = EventLog(
        folder=folder,
        max_bytes=int(h.snapshot_max_mb * 2**20),
        retention=h.snapshot_retention_hours * 3600,
        max_width=h.live_width,
        quality=h.jpeg_quality,
    )
    return events, tmp
