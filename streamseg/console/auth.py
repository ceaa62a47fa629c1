"""Who may read and change what through the console (``http.token``).

* ``/healthz``, ``/readyz``, ``/metrics``: always open (probes and scrapes
  carry no secret and must work without one).
* Changes (``POST``, ``PUT``, ``PATCH``, ``DELETE``): need the token; with
  no token configured, changes are off.
* Pages and reads: open on a loopback address; elsewhere they need the
  token, and with no token configured the console is off.

The token travels as ``Authorization: Bearer TOKEN`` (the page's API
calls) or ``?token=TOKEN`` (images and the first page load, which cannot
send headers). Missing: 401; wrong, or the feature off: 403.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable

from aiohttp import web

__all__ = ["OPEN_PATHS", "token_middleware"]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def token_middleware(
    *, token: str | None, loopback: bool
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The aiohttp middleware enforcing the rules above."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        write = request.method in WRITE_METHODS
        if token is None:
            if write:
                return _refuse(
                    403,
                    "changes are off: set http.token (e.g. ${STREAMSEG_HTTP_TOKEN}) to allow them",
                )
            if not loopback:
                return _refuse(
                    403, "the console is off on a non-loopback address without http.token"
                )
            return await handler(request)
        if not write and loopback:
            return await handler(request)
        given = _given(request)
        if given is None:
            return _refuse(401, "this needs the console token (Authorization: Bearer TOKEN)")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return _refuse(403, "wrong console token")
        return await handler(request)

    return check


def _given(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer ") :].strip()
    return request.query.get("token")


def _refuse(status: int, message: str) -> web.Response:
    issue = {"field": "token", "message": message, "hint": None}  # http_error's shape
    body = json.dumps({"error": message, "issues": [issue]}).encode() + b"\n"
    headers = {"WWW-Authenticate": 'Bearer realm="streamseg"'} if status == 401 else None
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)
