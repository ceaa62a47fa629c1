"""What the console's handlers share: the service they talk to and the shape of replies.

``ConsoleBackend`` is what the console needs from the running service
(``streamseg.runtime.console.ServiceConsole`` answers it). Replies are JSON;
errors are ``{"error", "issues": [{"field", "message", "hint"}]}``
(``http_error``), with the status saying what kind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from streamseg.ingest.config import CameraConfig
from streamseg.track.alerts import AlertsConfig

__all__ = ["ConsoleBackend", "camera_of", "http_error", "json_response", "read_body"]


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

    def replace_camera(self, camera: CameraConfig) -> None:
        """Serve ``camera`` instead of the camera of its id; when that fails the old one
        runs on (``SourceError``, ``ValueError``)."""
        ...

    def status(self) -> dict[str, Any]:
        """``{"sinks": {name: health}, "model": {arch, backend, precision, ...},
        "degraded": {part: ...}}`` (``degraded``: what is off while the rest runs)."""
        ...

    def remove_camera(self, camera_id: str) -> None:
        """Stop serving a camera; the others go on."""
        ...

    def clip_for(self, camera_id: str, pts: float | None) -> tuple[Path, bool] | None:
        """The recorded clip of an alert at stream time ``pts``: ``(path, finished)``."""
        ...


def camera_of(request: web.Request, backend: ConsoleBackend) -> str:
    """The ``{cid}`` of the request, a camera served now (else 404 naming them)."""
    cid = request.match_info["cid"]
    cams = backend.cameras()
    if cid not in cams:
        raise http_error(404, "camera", f"no camera has id {cid!r}", f"cameras: {', '.join(cams)}")
    return cid


async def read_body(request: web.Request, kind: type) -> Any:
    """The request's JSON body, of type ``kind`` (else 400 saying why)."""
    try:
        data = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise http_error(
            400, "body", f"the body is not JSON: {exc}", "send a JSON object"
        ) from None
    if not isinstance(data, kind):
        raise http_error(400, "body", "the body must be a JSON object", None)
    return data


def http_error(status: int, field: str | None, message: str, hint: str | None) -> web.HTTPException:
    """An error reply (raise it) with one issue naming ``field``."""
    body = {"error": message, "issues": [{"field": field, "message": message, "hint": hint}]}
    cls = {400: web.HTTPBadRequest, 404: web.HTTPNotFound, 409: web.HTTPConflict,
           422: web.HTTPUnprocessableEntity, 503: web.HTTPServiceUnavailable}[status]  # fmt: skip
    return cls(text=json.dumps(body), content_type="application/json")


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(data, indent=1) + "\n", content_type="application/json"
    )
