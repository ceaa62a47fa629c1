"""The running service as the console sees it (``streamseg.console.ConsoleBackend``).

The console asks for the cameras' state and rates, the model's class
names and the alert rules that run, and hands over new rules. This adapter
answers from the ``Service`` and its ``Pipeline`` (which appears only once
the model is loaded; until then the configured values stand). In a fleet it
lists the fleet's other cameras too (``remote``, with their ``owner``), and
the console reaches the other workers through ``streamseg.fleet.view``.
"""

from __future__ import annotations

import functools
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
    from streamseg.config.pipeline import PipelineConfig
    from streamseg.configbase.errors import ConfigIssue
    from streamseg.console.config import HttpConfig
    from streamseg.console.events import EventLog
    from streamseg.console.live import LiveView
    from streamseg.runtime.service import Service

__all__ = ["ServiceConsole", "build_console", "console_address", "event_log", "live_issues"]

log = logging.getLogger("streamseg.runtime")


class ServiceConsole:
    """``ConsoleBackend`` over a ``Service``."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._lock = threading.Lock()

    def cameras(self) -> dict[str, dict[str, Any]]:
        _ready, details = self.service.readiness()
        out: dict[str, dict[str, Any]] = {}
        for cam in self.service.cameras:
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
        fleet = self.service.fleet
        if fleet is not None:  # the fleet's other cameras, with their owner
            for info in out.values():
                info.update(owner=fleet.name, remote=False)
            for cid, row in fleet.remote_cameras().items():
                empty = {**dict.fromkeys(FRAME_COUNTERS, 0), "fps": None, "reconnects": 0}
                out.setdefault(cid, {**empty, "stalls": 0, **row, "remote": True})
        return out

    def status(self) -> dict[str, Any]:
        _ready, details = self.service.readiness()
        m = self.service.config.model
        model = {
            **details["model"],
            "backend": m.backend,
            "precision": m.precision,
            "device": m.device,
            "weights": m.weights,
            "hot_swap": m.hot_swap,
            "last_swap": None,
        }
        last = self.service.swap.last() if self.service.swap is not None else None
        if last is not None:
            model["last_swap"] = {
                "weights": last.request.weights,
                "ok": last.ok,
                "error": None if last.error is None else redact_text(last.error),
                "source": last.request.source,
                "time": last.finished,
                "load_s": round(last.load_s, 3),
            }
            ok = [o for o in self.service.swap.outcomes if o.ok]
            if ok:  # what runs now
                model["weights"] = ok[-1].request.weights
        return {
            "sinks": details["sinks"],
            "model": model,
            "stopping": details["stopping"],
            "degraded": details["degraded"],
        }

    def class_names(self) -> Sequence[str]:
        p = self.service.pipeline
        if p is not None:
            return tuple(p.segmenter.class_names)
        names = self.service.config.model.class_names
        return tuple(names) if names else ("__background__",)

    def alerts(self) -> AlertsConfig:
        return self.service.config.alerts

    def apply_alerts(self, alerts: AlertsConfig) -> None:
        with self._lock:
            p = self.service.pipeline
            if p is not None:
                p.tracker.set_alerts(alerts)  # PassThrough: ValueError, no rules can run
            cfg = self.service.config
            self.service.config = cfg.model_copy(update={"alerts": alerts})

    def add_camera(self, camera: CameraConfig) -> None:
        self.service.add_camera(camera)
        self._sync_cameras()

    def replace_camera(self, camera: CameraConfig) -> None:
        try:
            self.service.replace_camera(camera)
        finally:  # what runs, whether the change was made or undone
            self._sync_cameras()

    def remove_camera(self, camera_id: str) -> None:
        self.service.remove_camera(camera_id)
        self._sync_cameras()

    def _sync_cameras(self) -> None:
        """Keep ``service.config.cameras`` what runs (a restart of the pipeline would use it)."""
        cfg = self.service.config
        self.service.config = cfg.model_copy(update={"cameras": list(self.service.cameras)})

    def clip_for(self, camera_id: str, pts: float | None) -> tuple[Path, bool] | None:
        clips = self.service.clips
        return clips.clip_for(camera_id, pts) if clips is not None else None

    def frame_size(self, camera_id: str) -> tuple[int, int] | None:
        p = self.service.pipeline
        return p.frame_size(camera_id) if p is not None else None

    def fps(self, camera_id: str) -> float | None:
        """The camera's frames per second: ``PipelineStats.fps``, the one figure the
        status line, the tiles, the live badges and the charts show."""
        p = self.service.pipeline
        fps = p.stats.fps(camera_id) if p is not None else None
        return None if fps is None else round(fps, 2)


def build_console(
    service: Service, *, events: EventLog | None
) -> tuple[LiveView, Callable[[Any], None]]:
    """The console over ``service``: its live view, and its ``setup(app)``
    (``streamseg.console``) for the web server."""
    from streamseg.config.loader import validate_pipeline
    from streamseg.console.editor import PipelineEditor
    from streamseg.console.live import LiveView
    from streamseg.console.server import Console

    h = service.config.http
    backend = ServiceConsole(service)
    live = LiveView(
        trail_length=h.trail_length,
        events=events,
        rules_of=lambda cid: backend.alerts().cameras.get(cid),
        fps_of=backend.fps,
    )
    validate = functools.partial(validate_pipeline, checks=lambda c: live_issues(service, c))
    editor = (
        PipelineEditor(service.pipeline_path, validate=validate) if service.pipeline_path else None
    )
    fleet = service.fleet
    if fleet is not None:  # the other workers' consoles fetch this one's live views here
        fleet.advertise(console_address(h, fleet.config.console_url))
    view = fleet.view if fleet is not None else None
    console = Console(backend=backend, live=live, http=h, editor=editor, events=events, fleet=view)
    return live, console.install


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


def live_issues(service: Service, config: PipelineConfig) -> list[ConfigIssue]:
    """What a change to ``config`` would meet in the running service, found before it is
    applied: the same checks as start-up (``streamseg.cli.startup``) for the cameras
    it adds or changes (source parameters, files, devices, decoders), and every rule
    against the running model's classes (``streamseg.track.rules.checks``; while the
    model is being built, the classes its config or checkpoint names)."""
    from streamseg.ingest.checks import camera_issues
    from streamseg.runtime.factory import known_class_names
    from streamseg.track.rules.checks import rule_issues

    running = {c.id: c for c in service.cameras}
    issues = [
        issue
        for i, cam in enumerate(config.cameras)
        if running.get(cam.id) != cam
        for issue in camera_issues(cam, i)
    ]
    if not (config.tracking.enabled or config.alerts.enabled):
        return issues
    p = service.pipeline
    if p is not None:
        issues += rule_issues(config.alerts, p.segmenter.class_names, service.region_classes)
    else:  # the model is still being built: what the config or checkpoint says of it
        names = known_class_names(config.model)
        issues += rule_issues(config.alerts, names) if names is not None else []
    return issues


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
