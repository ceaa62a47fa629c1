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
    GET    /api/events/{n}/clip               an alert's recorded clip (record.clips on)
    GET    /api/cameras/{id}/alerts           the camera's zones, lines and rules
    PUT    /api/cameras/{id}/alerts           replace them all
    POST   /api/cameras/{id}/{zones|lines|rules}         create one (body has "name")
    PUT    /api/cameras/{id}/{zones|lines|rules}/{name}  replace one
    DELETE /api/cameras/{id}/{zones|lines|rules}/{name}  delete one

Changes go through ``PipelineEditor`` (validated with pipeline.yaml's schema,
saved in the pipeline file) and then to the running tracking stage, without
a restart. Who may call what: ``streamseg.console.auth``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from streamseg.config.alerts import AlertsConfig, CameraAlerts
from streamseg.config.cameras import CameraConfig
from streamseg.config.errors import ConfigIssue
from streamseg.config.pipeline import PipelineConfig
from streamseg.config.telemetry import HttpConfig
from streamseg.console.auth import token_middleware
from streamseg.console.editor import ChangeRefused, PipelineEditor, yaml_node
from streamseg.console.events import EventLog
from streamseg.console.health import FIELDS as HEALTH_FIELDS
from streamseg.console.health import HealthHistory
from streamseg.console.live import LiveFrame, LiveView
from streamseg.console.overlay import OverlayInfo, render_image
from streamseg.redact import redact_url

__all__ = ["Console", "ConsoleBackend"]

log = logging.getLogger("streamseg.console")

STATIC = Path(__file__).with_name("static")
_SAMPLER = web.AppKey("health_sampler", asyncio.Task)
BOUNDARY = "streamsegframe"
KINDS = ("zones", "lines", "rules")
FRAME_WAIT_S = 5.0


class ConsoleBackend(Protocol):
    """What the console needs from the running service (``streamseg.runtime.Service``)."""

    def cameras(self) -> dict[str, dict[str, Any]]:
        """``{id: {state, fps, url (redacted), live, reconnects, ...}}``."""
        ...

    def class_names(self) -> Sequence[str]: ...

    def alerts(self) -> AlertsConfig:
        """The alert rules running now."""
        ...

    def apply_alerts(self, alerts: AlertsConfig) -> None:
        """Run these rules from the next frame on (``ValueError`` naming the field if not)."""
        ...

    def frame_size(self, camera_id: str) -> tuple[int, int] | None:
        """``(H, W)`` of the camera's frames once one was seen."""
        ...

    def add_camera(self, camera: CameraConfig) -> None:
        """Start serving a camera (``ValueError`` if it cannot be)."""
        ...

    def status(self) -> dict[str, Any]:
        """``{"sinks": {name: health}, "model": {arch, backend, precision, ...}}``."""
        ...

    def remove_camera(self, camera_id: str) -> None:
        """Stop serving a camera; the others go on."""
        ...

    def clip_for(self, camera_id: str, pts: float | None) -> tuple[Path, bool] | None:
        """The recorded clip of an alert at stream time ``pts``: ``(path, finished)``."""
        ...


class Console:
    """The console: pages, live frames and the change API.

    Args:
        backend: the running service.
        live: the live-frame slots the pipeline fills for watched cameras.
        http: the ``http:`` section (token, live fps, JPEG quality).
        editor: the pipeline file's editor (``None``: changes are off).
        events: recent alerts with snapshots (``None``: no timeline).
    """

    def __init__(
        self,
        *,
        backend: ConsoleBackend,
        live: LiveView,
        http: HttpConfig,
        editor: PipelineEditor | None,
        events: EventLog | None = None,
    ) -> None:
        self.backend, self.live, self.http, self.editor = backend, live, http, editor
        self.events = events
        self.health = HealthHistory(interval=http.health_interval)

    def install(self, app: web.Application) -> None:
        token = self.http.token.get_secret_value() if self.http.token is not None else None
        app.middlewares.append(token_middleware(token=token, loopback=self.http.loopback))
        app.on_startup.append(self._start_sampling)
        app.on_cleanup.append(self._stop_sampling)
        r = app.router
        r.add_get("/", self.index)
        r.add_static("/static", STATIC)
        r.add_get("/api/cameras", self.list_cameras)
        r.add_post("/api/cameras", self.add_camera)
        r.add_put("/api/cameras/{cid}", self.replace_camera)
        r.add_delete("/api/cameras/{cid}", self.delete_camera)
        r.add_get("/api/cameras/{cid}/live.mjpg", self.mjpeg)
        r.add_get("/api/cameras/{cid}/frame.{fmt:jpg|png}", self.frame_image)
        r.add_get("/api/health", self.get_health)
        r.add_get("/api/events", self.list_events)
        r.add_get("/api/events/{eid}/snapshot.jpg", self.event_snapshot)
        r.add_get("/api/events/{eid}/clip", self.event_clip)
        r.add_get("/api/cameras/{cid}/alerts", self.get_alerts)
        r.add_put("/api/cameras/{cid}/alerts", self.put_alerts)
        r.add_post("/api/cameras/{cid}/{kind}", self.create_item)
        r.add_put("/api/cameras/{cid}/{kind}/{name}", self.replace_item)
        r.add_delete("/api/cameras/{cid}/{kind}/{name}", self.delete_item)

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
        }
        return _json(body)

    async def get_alerts(self, request: web.Request) -> web.Response:
        cid = self._camera(request)
        section = self.backend.alerts().cameras.get(cid)
        return _json((section or CameraAlerts()).model_dump(mode="json"))

    # -- health -----------------------------------------------------------------
    async def get_health(self, _request: web.Request) -> web.Response:
        """Every camera now and its history (``FIELDS`` per point), sinks and the model."""
        cams = self.backend.cameras()
        for cid, info in cams.items():
            info["history"] = self.health.series(cid)
        return _json({"fields": list(HEALTH_FIELDS), "cameras": cams, **self.backend.status()})

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
        """``?camera= &rule= &kind= &label= &since= &until= &limit=`` (times: Unix seconds)."""
        if self.events is None:
            return _json({"events": [], "snapshots": False})
        q = request.query
        try:
            since = float(q["since"]) if "since" in q else None
            until = float(q["until"]) if "until" in q else None
            limit = int(q.get("limit", 100))
        except ValueError:
            raise _error(
                400, "query", "since/until are Unix seconds, limit a count", None
            ) from None
        events = self.events.list(
            camera=q.get("camera") or None,
            rule=q.get("rule") or None,
            kind=q.get("kind") or None,
            label=q.get("label") or None,
            since=since,
            until=until,
            limit=max(1, min(limit, 1000)),
        )
        for e in events:
            e.update(self._clip_fields(e))
        return _json({"events": events, "snapshots": True})

    def _clip_fields(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """``clip``: the clip's URL once recording it began (else ``None``); ``clip_ready``."""
        found = self.backend.clip_for(str(event.get("camera_id")), event.get("pts"))
        if found is None:
            return {"clip": None, "clip_ready": False}
        return {"clip": f"/api/events/{event['id']}/clip", "clip_ready": found[1]}

    async def event_clip(self, request: web.Request) -> web.FileResponse:
        """The event's clip, once finished (404 while it is written, or without one)."""
        eid = request.match_info["eid"]
        event = self.events.get(int(eid)) if self.events is not None and eid.isdigit() else None
        found = self.backend.clip_for(event["camera_id"], event.get("pts")) if event else None
        if found is None or not found[0].is_file():
            raise _error(404, "event", "no clip for this event", "turn on record.clips")
        if not found[1]:
            raise _error(404, "event", "the clip is still being recorded", "ask again shortly")
        kind = "video/x-matroska" if found[0].suffix == ".mkv" else "video/mp4"
        return web.FileResponse(found[0], headers={"Content-Type": kind})

    async def event_snapshot(self, request: web.Request) -> web.FileResponse:
        path = None
        if self.events is not None and request.match_info["eid"].isdigit():
            path = self.events.snapshot(int(request.match_info["eid"]))
        if path is None:
            raise _error(
                404, "event", "no snapshot for this event (not written yet, or expired)", None
            )
        return web.FileResponse(path, headers={"Content-Type": "image/jpeg"})

    # -- live -----------------------------------------------------------------
    async def mjpeg(self, request: web.Request) -> web.StreamResponse:
        cid = self._camera(request)
        response = web.StreamResponse(
            headers={
                "Content-Type": f"multipart/x-mixed-replace; boundary={BOUNDARY}",
                "Cache-Control": "no-store",
            }
        )
        await response.prepare(request)
        period = 1.0 / self.http.live_fps
        last_seq: int | None = None
        with self.live.watch(cid):
            try:
                while True:
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

    async def frame_image(self, request: web.Request) -> web.Response:
        """The next live frame with overlays; ``X-Frame-Seq`` names it (PNG: exact colours)."""
        cid = self._camera(request)
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
                    raise _error(503, "camera", f"no frame from camera {cid!r} yet", None)
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

    # -- cameras --------------------------------------------------------------
    async def add_camera(self, request: web.Request) -> web.Response:
        body = await _body(request, dict)
        cid = body.get("id")
        if not isinstance(cid, str) or not cid:
            raise _error(422, "cameras.id", "a camera id is required", 'give "id": "..."')
        if cid in self.backend.cameras():
            raise _error(409, f"cameras.{cid}", f"camera {cid!r} already exists", "use PUT")

        def edit(tree: Any) -> None:
            tree.setdefault("cameras", yaml_node([])).append(yaml_node(body))

        def commit(config: PipelineConfig) -> None:
            self._run(lambda: self.backend.add_camera(config.camera(cid)))

        return await self._save(edit, commit, lambda c: _camera_json(c, cid), status=201)

    async def replace_camera(self, request: web.Request) -> web.Response:
        cid = self._camera(request)
        body = await _body(request, dict)
        if body.setdefault("id", cid) != cid:
            raise _error(422, "cameras.id", "the id cannot change", "delete and add instead")

        def edit(tree: Any) -> None:
            cams = tree.get("cameras") or []
            at = next(
                i for i, c in enumerate(cams) if isinstance(c, Mapping) and c.get("id") == cid
            )
            cams[at] = yaml_node(body)

        def commit(config: PipelineConfig) -> None:
            self._run(lambda: self.backend.remove_camera(cid))
            self._run(lambda: self.backend.add_camera(config.camera(cid)))

        return await self._save(edit, commit, lambda c: _camera_json(c, cid))

    async def delete_camera(self, request: web.Request) -> web.Response:
        cid = self._camera(request)

        def edit(tree: Any) -> None:
            cams = tree.get("cameras") or []
            for i in reversed(range(len(cams))):
                if isinstance(cams[i], Mapping) and cams[i].get("id") == cid:
                    del cams[i]
            alerts = (tree.get("alerts") or {}).get("cameras")
            if isinstance(alerts, dict) and cid in alerts:
                del alerts[cid]  # its zones and rules go with it

        def commit(config: PipelineConfig) -> None:
            self._run(lambda: self.backend.remove_camera(cid))
            self._run(lambda: self.backend.apply_alerts(config.alerts))

        return await self._save(edit, commit, lambda c: {"removed": cid})

    async def _save(
        self,
        edit: Callable[[Any], None],
        commit: Callable[[PipelineConfig], None],
        reply: Callable[[PipelineConfig], Any],
        status: int = 200,
    ) -> web.Response:
        if self.editor is None:
            raise _error(409, None, "changes are off: serve was not started from a file", None)
        editor = self.editor
        try:
            config = await asyncio.get_running_loop().run_in_executor(
                None, lambda: editor.change(edit, commit=commit)
            )
        except ChangeRefused as exc:
            return _json(exc.to_dict(), status=exc.status)
        return _json(reply(config), status=status)

    @staticmethod
    def _run(action: Callable[[], None]) -> None:
        """Run a change on the service; what it refuses becomes ``ChangeRefused(409)``."""
        try:
            action()
        except (ValueError, KeyError) as exc:
            raise ChangeRefused(409, [ConfigIssue(str(exc), loc=("cameras",))], str(exc)) from None

    # -- changes --------------------------------------------------------------
    async def put_alerts(self, request: web.Request) -> web.Response:
        cid = self._camera(request)
        body = await _body(request, dict)

        def edit(section: Any) -> None:
            section.clear()
            section.update(yaml_node(body))

        return await self._change(cid, edit)

    async def create_item(self, request: web.Request) -> web.Response:
        cid, kind = self._camera(request), self._kind(request)
        body = await _body(request, dict)
        name = body.get("name")
        where = f"alerts.cameras.{cid}.{kind}"
        if not isinstance(name, str) or not name:
            raise _error(422, f"{where}.name", "a name is required", 'give "name": "..."')

        def edit(section: Any) -> None:
            if _find(section, kind, name) is not None:
                raise ChangeRefused(
                    409,
                    [
                        ConfigIssue(
                            "already exists",
                            loc=(*where.split("."), name),
                            hint="use PUT to change it",
                        )
                    ],
                    f"{kind[:-1]} {name!r} already exists",
                )
            _put(section, kind, name, body)

        return await self._change(cid, edit, status=201)

    async def replace_item(self, request: web.Request) -> web.Response:
        cid, kind = self._camera(request), self._kind(request)
        name = request.match_info["name"]
        body = await _body(request, dict)

        def edit(section: Any) -> None:
            self._must_exist(section, cid, kind, name)
            _put(section, kind, name, body)

        return await self._change(cid, edit)

    async def delete_item(self, request: web.Request) -> web.Response:
        cid, kind = self._camera(request), self._kind(request)
        name = request.match_info["name"]

        def edit(section: Any) -> None:
            self._must_exist(section, cid, kind, name)
            items = section[kind]
            if kind == "rules":
                del items[_find(section, kind, name)]
            else:
                del items[name]

        return await self._change(cid, edit)

    async def _change(
        self, cid: str, edit: Callable[[Any], None], status: int = 200
    ) -> web.Response:
        """Edit the camera's section of the file; validate, run and save it, or refuse."""
        if self.editor is None:
            raise _error(409, None, "changes are off: serve was not started from a file", None)
        editor, backend = self.editor, self.backend
        size = backend.frame_size(cid)
        before = backend.alerts()

        def tree_edit(tree: Any) -> None:
            alerts = tree.setdefault("alerts", yaml_node({}))
            cameras = alerts.setdefault("cameras", yaml_node({}))
            section = cameras.setdefault(cid, yaml_node({}))
            edit(section)
            for kind in KINDS:
                if kind in section and not section[kind]:
                    del section[kind]
            if not section:
                del cameras[cid]

        def commit(config: PipelineConfig) -> None:
            issues = _off_frame(cid, config.alerts.cameras.get(cid), size)
            if issues:
                raise ChangeRefused(422, issues, "the change is not valid")
            try:
                backend.apply_alerts(config.alerts)
            except ValueError as exc:
                field = getattr(exc, "field", None)
                issue = ConfigIssue(str(exc), loc=tuple(field.split(".")) if field else ())
                raise ChangeRefused(422, [issue], "the change cannot run") from None

        def change() -> PipelineConfig:
            try:
                return editor.change(tree_edit, commit=commit)
            except ChangeRefused:
                if backend.alerts() is not before:
                    backend.apply_alerts(before)  # saving failed after it ran: undo
                raise

        try:
            config = await asyncio.get_running_loop().run_in_executor(None, change)
        except ChangeRefused as exc:
            return _json(exc.to_dict(), status=exc.status)
        section = config.alerts.cameras.get(cid) or CameraAlerts()
        return _json(section.model_dump(mode="json"), status=status)

    def _must_exist(self, section: Any, cid: str, kind: str, name: str) -> None:
        if _find(section, kind, name) is None:
            known = _names(section, kind)
            raise ChangeRefused(
                404,
                [
                    ConfigIssue(
                        f"no {kind[:-1]} named {name!r}",
                        loc=("alerts", "cameras", cid, kind, name),
                        hint=f"{kind}: {', '.join(known) or 'none yet'}",
                    )
                ],
                f"no {kind[:-1]} named {name!r}",
            )

    def _camera(self, request: web.Request) -> str:
        cid = request.match_info["cid"]
        cams = self.backend.cameras()
        if cid not in cams:
            raise _error(404, "camera", f"no camera has id {cid!r}", f"cameras: {', '.join(cams)}")
        return cid

    def _kind(self, request: web.Request) -> str:
        kind = request.match_info["kind"]
        if kind not in KINDS:
            raise _error(
                404, None, f"no such collection {kind!r}", f"use one of {', '.join(KINDS)}"
            )
        return kind


def _camera_json(config: PipelineConfig, camera_id: str) -> dict[str, Any]:
    cam = config.camera(camera_id)
    out = cam.model_dump(mode="json")
    out["url"] = redact_url(cam.url)
    return out


def _find(section: Any, kind: str, name: str) -> Any:
    """The key (zones, lines) or index (rules) of ``name``, else ``None``."""
    items = section.get(kind)
    if items is None:
        return None
    if kind == "rules":
        for i, rule in enumerate(items):
            if isinstance(rule, Mapping) and rule.get("name") == name:
                return i
        return None
    return name if name in items else None


def _names(section: Any, kind: str) -> list[str]:
    items = section.get(kind) or ()
    if kind == "rules":
        return [str(r.get("name")) for r in items if isinstance(r, Mapping)]
    return [str(k) for k in items]


def _put(section: Any, kind: str, name: str, body: Mapping[str, Any]) -> None:
    if kind == "rules":
        rule = yaml_node({**body, "name": name})
        rules = section.setdefault("rules", yaml_node([]))
        at = _find(section, kind, name)
        if at is None:
            rules.append(rule)
        else:
            rules[at] = rule
        return
    item = {k: v for k, v in body.items() if k != "name"}
    section.setdefault(kind, yaml_node({}))[name] = yaml_node(item)


def _off_frame(
    cid: str, section: CameraAlerts | None, size: tuple[int, int] | None
) -> list[ConfigIssue]:
    """Pixel geometry outside the camera's ``(H, W)`` frame."""
    if section is None or size is None:
        return []
    h, w = size
    issues = []
    shapes: list[tuple[str, str, Sequence[tuple[float, float]], str | None]] = []
    shapes += [("zones", n, z.polygon, z.coordinates) for n, z in section.zones.items()]
    shapes += [("lines", n, list(ln.points), ln.coordinates) for n, ln in section.lines.items()]
    for kind, name, points, coords in shapes:
        if (coords or section.coordinates) != "pixels":
            continue
        for i, (x, y) in enumerate(points):
            if not (0 <= x <= w and 0 <= y <= h):
                field = "polygon" if kind == "zones" else "points"
                issues.append(
                    ConfigIssue(
                        f"point [{x:g}, {y:g}] is outside the {w}x{h} frame",
                        loc=("alerts", "cameras", cid, kind, name, field, i),
                        hint=f"pixels run from [0, 0] to [{w}, {h}]",
                    )
                )
                break
    return issues


async def _body(request: web.Request, kind: type) -> Any:
    try:
        data = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise _error(400, "body", f"the body is not JSON: {exc}", "send a JSON object") from None
    if not isinstance(data, kind):
        raise _error(400, "body", "the body must be a JSON object", None)
    return data


def _error(status: int, field: str | None, message: str, hint: str | None) -> web.HTTPException:
    body = {"error": message, "issues": [{"field": field, "message": message, "hint": hint}]}
    cls = {400: web.HTTPBadRequest, 404: web.HTTPNotFound, 409: web.HTTPConflict,
           422: web.HTTPUnprocessableEntity, 503: web.HTTPServiceUnavailable}[status]  # fmt: skip
    return cls(text=json.dumps(body), content_type="application/json")


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(data, indent=1) + "\n", content_type="application/json"
    )
