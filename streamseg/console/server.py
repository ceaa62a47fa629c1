"""The console's pages and JSON API, mounted on ``serve``'s web server.

Routes (all JSON unless said; errors are ``{"error", "issues": [{"field",
"message", "hint"}]}``)::

    GET    /                                  the console page (static/index.html)
    GET    /static/...                        its script and style sheet
    GET    /api/cameras                       every camera: state, fps, redacted url, ...
    POST   /api/cameras                       add a camera (body: its pipeline.yaml entry)
    PUT    /api/cameras/{id}                  change a camera (it restarts; the others go on)
    DELETE /api/cameras/{id}                  remove a camera (and its alerts section)
    GET    /api/cameras/{id}/live.mjpg        live frames with overlays (multipart JPEG)
    GET    /api/cameras/{id}/frame.jpg        one live frame with overlays (.png: lossless)
    GET    /api/health                        cameras now and their last 15 minutes, sinks, model
    GET    /api/events                        recent alerts (camera rule kind label since until)
    GET    /api/events/{n}/snapshot.jpg       an alert's snapshot (its track, zone or line)
                                              (``WORKER:N``: another worker's, fetched from it)
    GET    /api/events/{n}/clip               an alert's recorded clip (record.clips on)
    GET    /api/cameras/{id}/alerts           the camera's zones, lines and rules
    PUT    /api/cameras/{id}/alerts           replace them all
    POST   /api/cameras/{id}/{zones|lines|rules}         create one (body has "name")
    PUT    /api/cameras/{id}/{zones|lines|rules}/{name}  replace one
    DELETE /api/cameras/{id}/{zones|lines|rules}/{name}  delete one

The changes (POST, PUT, DELETE) are ``streamseg.console.changes``'s: they go
through ``PipelineEditor`` (validated with pipeline.yaml's schema, saved in
the pipeline file) and then to the running service, without a restart.
Who may call what: ``streamseg.console.auth``. In a fleet, a camera another
worker serves is listed with its owner, and its live view is fetched from
the owner's console (``streamseg.console.fleet``); so are the snapshots of
the other workers' alerts, which the events list beside this worker's own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from streamseg.config.http import HttpConfig
from streamseg.console.auth import token_middleware
from streamseg.console.changes import ChangeAPI
from streamseg.console.editor import PipelineEditor
from streamseg.console.events import EventLog
from streamseg.console.fleet import FleetPeers, matches, proxy, remote_event, split_event_id
from streamseg.console.health import FIELDS as HEALTH_FIELDS
from streamseg.console.health import HealthHistory
from streamseg.console.live import LiveFrame, LiveView
from streamseg.console.overlay import OverlayInfo, render_image
from streamseg.console.web import (
    ConsoleBackend,
    camera_of,
    http_error,
    json_errors,
    json_response,
)
from streamseg.track.alerts import ALERT_KINDS, CameraAlerts

__all__ = ["Console", "ConsoleBackend"]

log = logging.getLogger("streamseg.console")

STATIC = Path(__file__).with_name("static")
_SAMPLER = web.AppKey("health_sampler", asyncio.Task)
BOUNDARY = "streamsegframe"
FRAME_WAIT_S = 5.0


class Console:
    """The console: pages, live frames and the change API.

    Args:
        backend: the running service.
        live: the live-frame slots the pipeline fills for watched cameras.
        http: the ``http:`` section (token, live fps, JPEG quality).
        editor: the pipeline file's editor (``None``: changes are off).
        events: recent alerts with snapshots (``None``: no timeline).
        fleet: the other workers of this worker's fleet (``None``: no fleet).
    """

    def __init__(
        self,
        *,
        backend: ConsoleBackend,
        live: LiveView,
        http: HttpConfig,
        editor: PipelineEditor | None,
        events: EventLog | None = None,
        fleet: FleetPeers | None = None,
    ) -> None:
        self.backend, self.live, self.http, self.editor = backend, live, http, editor
        self.events, self.fleet = events, fleet
        self.health = HealthHistory(interval=http.health_interval)

    def install(self, app: web.Application) -> None:
        token = self.http.token.get_secret_value() if self.http.token is not None else None
        app.middlewares.append(json_errors)  # outermost: the token's refusals are JSON already
        app.middlewares.append(token_middleware(token=token, loopback=self.http.loopback))
        app.on_startup.append(self._start_sampling)
        app.on_cleanup.append(self._stop_sampling)
        r = app.router
        r.add_get("/", self.index)
        r.add_static("/static", STATIC)
        r.add_get("/api/cameras", self.list_cameras)
        r.add_get("/api/cameras/{cid}/live.mjpg", self.mjpeg)
        r.add_get("/api/cameras/{cid}/frame.{fmt:jpg|png}", self.frame_image)
        r.add_get("/api/health", self.get_health)
        r.add_get("/api/events", self.list_events)
        r.add_get("/api/events/{eid}/snapshot.jpg", self.event_snapshot)
        r.add_get("/api/events/{eid}/clip", self.event_clip)
        r.add_get("/api/cameras/{cid}/alerts", self.get_alerts)
        ChangeAPI(backend=self.backend, http=self.http, editor=self.editor).install(r)

    # -- pages and reads ------------------------------------------------------
    async def index(self, _request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    async def list_cameras(self, _request: web.Request) -> web.Response:
        cams = self.backend.cameras()
        for cid, info in cams.items():
            info["viewers"] = self.live.viewers().get(cid, 0)
            info["frame_size"] = self.backend.frame_size(cid)
        body = {
            "cameras": cams,
            "class_names": list(self.backend.class_names()[1:]),
            "changes": self.editor is not None and self.http.token is not None,
            "alert_kinds": list(ALERT_KINDS),  # the events filter's choices
        }
        return json_response(body)

    async def get_alerts(self, request: web.Request) -> web.Response:
        cid = camera_of(request, self.backend)
        section = self.backend.alerts().cameras.get(cid)
        return json_response((section or CameraAlerts()).model_dump(mode="json"))

    # -- health -----------------------------------------------------------------
    async def get_health(self, _request: web.Request) -> web.Response:
        """Every camera now and its history (``FIELDS`` per point), sinks and the model."""
        cams = self.backend.cameras()
        for cid, info in cams.items():
            info["history"] = self.health.series(cid)
        return json_response(
            {"fields": list(HEALTH_FIELDS), "cameras": cams, **self.backend.status()}
        )

    async def _start_sampling(self, app: web.Application) -> None:
        app[_SAMPLER] = asyncio.get_running_loop().create_task(self._sample_forever())

    async def _stop_sampling(self, app: web.Application) -> None:
        task = app.get(_SAMPLER)
        if task is not None:
            task.cancel()

    async def _sample_forever(self) -> None:
        while True:
            try:
                self.health.sample(self.backend.cameras())
            except Exception:
                log.exception("console: sampling camera health failed")
            await asyncio.sleep(self.health.interval)

    # -- events -----------------------------------------------------------------
    async def list_events(self, request: web.Request) -> web.Response:
        """``?camera= &rule= &kind= &label= &since= &until= &limit=`` (times: Unix seconds);
        in a fleet, the other workers' alerts too (from Redis), newest first."""
        if self.events is None and self.fleet is None:
            return json_response({"events": [], "snapshots": False})
        q = request.query
        try:
            since = float(q["since"]) if "since" in q else None
            until = float(q["until"]) if "until" in q else None
            limit = int(q.get("limit", 100))
        except ValueError:
            raise http_error(
                400, "query", "since/until are Unix seconds, limit a count", None
            ) from None
        filters: dict[str, Any] = {k: q.get(k) or None for k in ("camera", "rule", "kind", "label")}
        filters.update(since=since, until=until, limit=max(1, min(limit, 1000)))
        events = self.events.list(**filters) if self.events is not None else []
        for e in events:
            e.update(self._clip_fields(e))
        if self.fleet is not None:
            others = [remote_event(m) for m in self.fleet.alerts()]
            events += [e for e in others if matches(e, filters)]
            events.sort(key=lambda e: -float(e.get("time", 0)))
            del events[filters["limit"] :]
        return json_response({"events": events, "snapshots": self.events is not None})

    def _clip_fields(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """``clip``: the clip's URL once recording it began (else ``None``); ``clip_ready``."""
        found = self.backend.clip_for(str(event.get("camera_id")), event.get("pts"))
        if found is None:
            return {"clip": None, "clip_ready": False}
        return {"clip": f"/api/events/{event['id']}/clip", "clip_ready": found[1]}

    async def event_clip(self, request: web.Request) -> web.StreamResponse:
        """The event's clip, once finished (404 while it is written, or without one)."""
        eid = request.match_info["eid"]
        if (passed_on := await self._from_worker(request, "clip")) is not None:
            return passed_on
        event = self.events.get(int(eid)) if self.events is not None and eid.isdigit() else None
        found = self.backend.clip_for(event["camera_id"], event.get("pts")) if event else None
        if found is None or not found[0].is_file():
            raise http_error(404, "event", "no clip for this event", "turn on record.clips")
        if not found[1]:
            raise http_error(404, "event", "the clip is still being recorded", "ask again shortly")
        kind = "video/x-matroska" if found[0].suffix == ".mkv" else "video/mp4"
        return web.FileResponse(found[0], headers={"Content-Type": kind})

    async def event_snapshot(self, request: web.Request) -> web.StreamResponse:
        if (passed_on := await self._from_worker(request, "snapshot.jpg")) is not None:
            return passed_on
        path = None
        if self.events is not None and request.match_info["eid"].isdigit():
            path = self.events.snapshot(int(request.match_info["eid"]))
        if path is None:
            raise http_error(
                404, "event", "no snapshot for this event (not written yet, or expired)", None
            )
        return web.FileResponse(path, headers={"Content-Type": "image/jpeg"})

    async def _from_worker(self, request: web.Request, what: str) -> web.StreamResponse | None:
        """Another worker's event ``WORKER:N``: its ``what``, fetched from that worker."""
        other = split_event_id(request.match_info["eid"])
        if other is None:
            return None
        console = self.fleet.worker_console(other[0]) if self.fleet is not None else None
        if console is None:
            raise http_error(404, "event", f"no console of worker {other[0]!r} is known", None)
        return await proxy(request, console, f"/api/events/{other[1]}/{what}")

    # -- live -----------------------------------------------------------------
    def _elsewhere(self, cid: str) -> str | None:
        """The console of the worker that serves ``cid`` when another one does (404 when
        that worker has no console)."""
        info = self.backend.cameras().get(cid, {})
        if not info.get("remote"):
            return None
        console = self.fleet.console_of(cid) if self.fleet is not None else None
        if console is None:
            owner = info.get("owner")
            raise http_error(
                404, "camera", f"camera {cid!r} is served by {owner or 'no worker'}, "
                "whose console is not known here", "set fleet.console_url on every worker",
            )  # fmt: skip
        return console

    async def mjpeg(self, request: web.Request) -> web.StreamResponse:
        cid = camera_of(request, self.backend)
        if (console := self._elsewhere(cid)) is not None:
            return await proxy(request, console, request.path)
        response = web.StreamResponse(
            headers={
                "Content-Type": f"multipart/x-mixed-replace; boundary={BOUNDARY}",
                "Cache-Control": "no-store",
            }
        )
        await response.prepare(request)
        period = 1.0 / self.http.live_fps
        last_seq: int | None = None
        loop_time = asyncio.get_running_loop().time
        last_check = loop_time()
        with self.live.watch(cid):
            try:
                while True:
                    if loop_time() - last_check >= 1.0:  # a camera removed (or moved) ends
                        last_check = loop_time()
                        if self.backend.cameras().get(cid, {"remote": True}).get("remote"):
                            break
                    frame = self.live.latest(cid)
                    if frame is not None and frame.seq != last_seq:
                        last_seq = frame.seq
                        jpeg = await self._render(cid, frame)
                        head = (
                            f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\n"
                            f"Content-Length: {len(jpeg)}\r\nX-Frame-Seq: {frame.seq}\r\n\r\n"
                        )
                        await response.write(head.encode() + jpeg + b"\r\n")
                    await asyncio.sleep(period)
            except (ConnectionResetError, asyncio.CancelledError):
                pass
        return response

    async def frame_image(self, request: web.Request) -> web.StreamResponse:
        """The next live frame with overlays; ``X-Frame-Seq`` names it (PNG: exact colours)."""
        cid = camera_of(request, self.backend)
        if (console := self._elsewhere(cid)) is not None:
            return await proxy(request, console, request.path)
        fmt = request.match_info["fmt"]
        loop = asyncio.get_running_loop()
        with self.live.watch(cid):
            deadline = loop.time() + FRAME_WAIT_S
            first = self.live.latest(cid)
            while True:
                frame = self.live.latest(cid)
                if frame is not None and frame is not first:
                    break
                if loop.time() > deadline:
                    raise http_error(503, "camera", f"no frame from camera {cid!r} yet", None)
                await asyncio.sleep(0.05)
        body = await self._render(cid, frame, fmt="png" if fmt == "png" else "jpeg")
        return web.Response(
            body=body,
            content_type="image/png" if fmt == "png" else "image/jpeg",
            headers={"X-Frame-Seq": str(frame.seq)},
        )

    async def _render(self, cid: str, frame: LiveFrame, fmt: str = "jpeg") -> bytes:
        state = self.backend.cameras().get(cid, {}).get("state", "?")
        info = OverlayInfo(
            class_names=self.backend.class_names(),
            alerts=self.backend.alerts().cameras.get(cid),
            trails=frame.trails,
            counts=frame.counts,
            status=f"{cid}  {state}  {frame.fps:.1f} fps",
        )
        quality, width = self.http.jpeg_quality, self.http.live_width

        def work() -> bytes:
            inst = frame.result.instances
            return render_image(frame.image, inst, info, quality=quality, max_width=width, fmt=fmt)

        return await asyncio.get_running_loop().run_in_executor(None, work)
