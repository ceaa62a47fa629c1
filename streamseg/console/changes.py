"""The console's change API: cameras, zones, lines and rules, while ``serve`` runs.

Routes (installed by ``Console``)::

    POST   /api/cameras                       add a camera (body: its pipeline.yaml entry)
    PUT    /api/cameras/{id}                  change a camera (it restarts; the others go on)
    DELETE /api/cameras/{id}                  remove a camera (and its alerts section)
    PUT    /api/cameras/{id}/alerts           replace its zones, lines and rules
    POST   /api/cameras/{id}/{zones|lines|rules}         create one (body has "name")
    PUT    /api/cameras/{id}/{zones|lines|rules}/{name}  replace one
    DELETE /api/cameras/{id}/{zones|lines|rules}/{name}  delete one

Each change goes through ``PipelineEditor`` (validated with pipeline.yaml's
schema, saved in the pipeline file, only the lines it is about rewritten)
and then to the running service, without a restart; what the service
refuses leaves the file as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from streamseg.config.http import HttpConfig
from streamseg.config.pipeline import PipelineConfig
from streamseg.configbase.errors import ConfigIssue
from streamseg.console.editor import ChangeRefused, PipelineEditor, yaml_node
from streamseg.console.web import (
    ConsoleBackend,
    camera_of,
    http_error,
    json_response,
    read_body,
)
from streamseg.errors import StartupError
from streamseg.redact import redact_url
from streamseg.track.alerts import CameraAlerts

__all__ = ["KINDS", "ChangeAPI"]

KINDS = ("zones", "lines", "rules")


class ChangeAPI:
    """The handlers of the change routes.

    Args:
        backend: the running service.
        http: the ``http:`` section.
        editor: the pipeline file's editor (``None``: every change is refused, 409).
    """

    def __init__(
        self, *, backend: ConsoleBackend, http: HttpConfig, editor: PipelineEditor | None
    ) -> None:
        self.backend, self.http, self.editor = backend, http, editor

    def install(self, router: web.UrlDispatcher) -> None:
        router.add_post("/api/cameras", self.add_camera)
        router.add_put("/api/cameras/{cid}", self.replace_camera)
        router.add_delete("/api/cameras/{cid}", self.delete_camera)
        router.add_put("/api/cameras/{cid}/alerts", self.put_alerts)
        router.add_post("/api/cameras/{cid}/{kind}", self.create_item)
        router.add_put("/api/cameras/{cid}/{kind}/{name}", self.replace_item)
        router.add_delete("/api/cameras/{cid}/{kind}/{name}", self.delete_item)

    # -- cameras --------------------------------------------------------------
    async def add_camera(self, request: web.Request) -> web.Response:
        body = await read_body(request, dict)
        cid = body.get("id")
        if not isinstance(cid, str) or not cid:
            raise http_error(422, "cameras.id", "a camera id is required", 'give "id": "..."')
        if cid in self.backend.cameras():
            raise http_error(409, f"cameras.{cid}", f"camera {cid!r} already exists", "use PUT")

        def edit(tree: Any) -> None:
            tree.setdefault("cameras", yaml_node([])).append(yaml_node(body))

        def commit(config: PipelineConfig) -> None:
            self._run(lambda: self.backend.add_camera(config.camera(cid)), config, cid)

        return await self._save(edit, commit, lambda c: _camera_json(c, cid), status=201)

    async def replace_camera(self, request: web.Request) -> web.Response:
        cid = camera_of(request, self.backend)
        body = await read_body(request, dict)
        if body.setdefault("id", cid) != cid:
            raise http_error(422, "cameras.id", "the id cannot change", "delete and add instead")

        def edit(tree: Any) -> None:
            cams = tree.get("cameras") or []
            at = next(
                i for i, c in enumerate(cams) if isinstance(c, Mapping) and c.get("id") == cid
            )
            cams[at] = yaml_node(body)

        def commit(config: PipelineConfig) -> None:  # the old camera runs on if it fails
            self._run(lambda: self.backend.replace_camera(config.camera(cid)), config, cid)

        return await self._save(edit, commit, lambda c: _camera_json(c, cid))

    async def delete_camera(self, request: web.Request) -> web.Response:
        cid = camera_of(request, self.backend)

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
            raise http_error(409, None, "changes are off: serve was not started from a file", None)
        editor = self.editor
        try:
            config = await asyncio.get_running_loop().run_in_executor(
                None, lambda: editor.change(edit, commit=commit)
            )
        except ChangeRefused as exc:
            return json_response(exc.to_dict(), status=exc.status)
        return json_response(reply(config), status=status)

    @staticmethod
    def _run(
        action: Callable[[], None], config: PipelineConfig | None = None, cid: str | None = None
    ) -> None:
        """Run a change on the service. A camera whose source fails to open or start
        (``StartupError``: ``SourceError``) becomes ``ChangeRefused(422)`` naming its
        ``url``; what the service refuses otherwise ``ChangeRefused(409)``. Either
        way the service is as it was (``runtime.camera_changes``) and the file is
        not written."""
        try:
            action()
        except StartupError as exc:
            ids = [c.id for c in config.cameras] if config is not None else []
            loc: tuple[str | int, ...] = (
                ("cameras", ids.index(cid), "url") if cid in ids else ("cameras",)
            )
            hint = exc.fix or "nothing was changed: fix the camera's entry and send it again"
            issue = ConfigIssue(str(exc), loc=loc, hint=hint)
            raise ChangeRefused(422, [issue], "the camera could not be started") from None
        except (ValueError, KeyError) as exc:
            raise ChangeRefused(409, [ConfigIssue(str(exc), loc=("cameras",))], str(exc)) from None

    # -- changes --------------------------------------------------------------
    async def put_alerts(self, request: web.Request) -> web.Response:
        cid = camera_of(request, self.backend)
        body = await read_body(request, dict)

        def edit(section: Any) -> None:
            section.clear()
            section.update(yaml_node(body))

        return await self._change(cid, edit)

    async def create_item(self, request: web.Request) -> web.Response:
        cid, kind = camera_of(request, self.backend), self._kind(request)
        body = await read_body(request, dict)
        name = body.get("name")
        where = f"alerts.cameras.{cid}.{kind}"
        if not isinstance(name, str) or not name:
            raise http_error(422, f"{where}.name", "a name is required", 'give "name": "..."')

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
        cid, kind = camera_of(request, self.backend), self._kind(request)
        name = request.match_info["name"]
        body = await read_body(request, dict)

        def edit(section: Any) -> None:
            self._must_exist(section, cid, kind, name)
            _put(section, kind, name, body)

        return await self._change(cid, edit)

    async def delete_item(self, request: web.Request) -> web.Response:
        cid, kind = camera_of(request, self.backend), self._kind(request)
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
            raise http_error(409, None, "changes are off: serve was not started from a file", None)
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
            return json_response(exc.to_dict(), status=exc.status)
        section = config.alerts.cameras.get(cid) or CameraAlerts()
        return json_response(section.model_dump(mode="json"), status=status)

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

    def _kind(self, request: web.Request) -> str:
        kind = request.match_info["kind"]
        if kind not in KINDS:
            raise http_error(
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
    """Create or replace one item, written in the style of its neighbours (a rule on one
    line ``{name: ..., type: ...}`` where the others are so)."""
    if kind == "rules":
        rule = yaml_node({"name": name, **{k: v for k, v in body.items() if k != "name"}})
        rules = section.setdefault("rules", yaml_node([]))
        at = _find(section, kind, name)
        _like(rule, rules[at] if at is not None else (rules[-1] if rules else None))
        if at is None:
            rules.append(rule)
        else:
            rules[at] = rule
        return
    item = yaml_node({k: v for k, v in body.items() if k != "name"})
    items = section.setdefault(kind, yaml_node({}))
    _like(item, items.get(name) if name in items else next(iter(items.values()), None))
    items[name] = item


def _like(node: Any, neighbour: Any) -> None:
    """Give ``node`` (a new mapping) the flow or block style of ``neighbour``."""
    fa = getattr(neighbour, "fa", None)
    if fa is not None and fa.flow_style() and hasattr(node, "fa"):
        node.fa.set_flow_style()


def _off_frame(
    cid: str, section: CameraAlerts | None, size: tuple[int, int] | None
) -> list[ConfigIssue]:
    """Pixel geometry outside the camera's ``(H, W)`` frame."""
    if section is None or size is None:
        return []
    h, w = size
    issues = []
    # Normalised points lie in [0, 1] (the config checks it): in pixels they are inside.
    resolved = section.shapes(size)
    shapes: list[tuple[str, str, Sequence[tuple[float, float]]]] = []
    shapes += [("zones", n, pts) for n, pts in resolved.zones.items()]
    shapes += [("lines", n, pts) for n, pts in resolved.lines.items()]
    for kind, name, points in shapes:
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
