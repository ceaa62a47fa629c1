"""What the console's handlers share: the service they talk to and the shape of replies.

``ConsoleBackend`` is what the console needs from the running service
(``streamseg.runtime.console.ServiceConsole`` answers it). Replies are JSON;
errors are ``{"error", "issues": [{"field", "message", "hint"}]}``
(``http_error``), with the status saying what kind. ``json_errors`` puts
every other refusal in that shape too: aiohttp's own (413 for a body over
its size limit, 405) and the 500 of a handler that failed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from streamseg.ingest.config import CameraConfig
from streamseg.redact import redact_text
from streamseg.track.alerts import AlertsConfig

__all__ = [
    "ConsoleBackend",
    "camera_of",
    "http_error",
    "json_errors",
    "json_response",
    "read_body",
]

log = logging.getLogger("streamseg.console")


class ConsoleBackend(Protocol):
    """What the console needs from the running service.

    One implementation, ``streamseg.runtime.console.ServiceConsole``, and a
    protocol on purpose: it is the one seam between the console and the
    runtime, which sits above it (the runtime builds the ``Console``, feeds its
    ``LiveView`` frames from the track thread and its ``EventLog`` snapshots from
    the sinks' feed). The backend answers from the runtime's own parts (the
    ``Pipeline``, ``ServedCameras``, the hot swap's ``SwapController``), so the
    console cannot name it without an import circle; turning the order round
    (the console above the runtime) would need the same seam the other way
    (the runtime naming a protocol for the live view, the web server's setup
    and the console's ``attach``/``close``), with three methods' worth more of it.
    """

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


def _error_body(message: str, field: str | None, hint: str | None) -> str:
    return json.dumps(
        {"error": message, "issues": [{"field": field, "message": message, "hint": hint}]}
    )


@web.middleware
async def json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every refusal as ``http_error``'s JSON: aiohttp's plain-text ones (413, 405,
    ...) and a handler's unexpected exception (500, logged with its traceback)."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise
        too_large = exc.status == 413
        body = _error_body(
            f"the body is too large ({exc.text})" if too_large else exc.reason,
            "body" if too_large else None,
            f"send at most {request.client_max_size} bytes" if too_large else None,
        )
        headers = {k: v for k, v in exc.headers.items() if k.lower() not in _OWN_HEADERS}
        return web.Response(
            status=exc.status, text=body, content_type="application/json", headers=headers
        )
    except Exception as exc:
        log.exception("console: %s %s failed", request.method, request.path)
        what = redact_text(str(exc).splitlines()[0] if str(exc) else "")
        message = f"internal error: {type(exc).__name__}" + (f": {what}" if what else "")
        body = _error_body(
            message, None, "a fault of the service, not of the request: its log has the traceback"
        )
        return web.Response(status=500, text=body, content_type="application/json")


_OWN_HEADERS = frozenset({"content-type", "content-length"})


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(data, indent=1) + "\n", content_type="application/json"
    )
