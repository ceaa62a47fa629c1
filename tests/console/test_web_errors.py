"""Every refusal of the console is JSON of one shape, over real HTTP (aiohttp's own
413 included, and the 500 of a handler that fails)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiohttp import web

from streamseg.console.auth import token_middleware
from streamseg.console.web import http_error, json_errors, json_response, read_body
from streamseg.telemetry.http import HealthServer
from tests.support.console import call

TOKEN = "t0ken-of-the-test"


async def _echo(request: web.Request) -> web.Response:
    return json_response(await read_body(request, dict))


async def _refuse(_request: web.Request) -> web.Response:
    raise http_error(422, "zones.z.polygon", "the polygon crosses itself", "list them in order")


async def _fail(_request: web.Request) -> web.Response:
    raise RuntimeError("lost redis://:hunter2@db:6379/0 midway")


def _setup(app: web.Application) -> None:
    app.middlewares.append(json_errors)
    app.middlewares.append(token_middleware(token=TOKEN, loopback=True))
    app.router.add_post("/api/echo", _echo)
    app.router.add_post("/api/refuse", _refuse)
    app.router.add_get("/api/fail", _fail)


def _shape(reply: Any) -> tuple[str, str | None, str | None]:
    """``(error, field, hint)`` of a refusal, checking it has the one shape."""
    assert isinstance(reply, dict) and set(reply) == {"error", "issues"}, reply
    (issue,) = reply["issues"]
    assert set(issue) == {"field", "message", "hint"} and issue["message"] == reply["error"]
    return reply["error"], issue["field"], issue["hint"]


def test_every_refusal_is_json_of_one_shape(caplog: pytest.LogCaptureFixture) -> None:
    server = HealthServer(host="127.0.0.1", port=0, readiness=lambda: (True, {}), metrics=None,
                          setup=_setup).start()  # fmt: skip
    port = server.port
    try:
        assert call(port, "POST", "/api/echo", {"a": 1}, token=TOKEN) == (200, {"a": 1})
        code, reply = call(port, "POST", "/api/refuse", {}, token=TOKEN)
        assert code == 422 and _shape(reply)[1] == "zones.z.polygon"
        code, reply = call(port, "POST", "/api/echo", {"a": 1})
        assert code == 401 and _shape(reply)[1] == "token"
        # aiohttp's own refusal of a body over its 1 MiB limit: plain text before.
        code, reply = call(port, "POST", "/api/echo", raw=b"x" * (2 << 20), token=TOKEN)
        error, field, hint = _shape(reply)
        assert code == 413 and field == "body" and "too large" in error, reply
        assert hint == "send at most 1048576 bytes"
        # A handler's failure: a 500 in the same shape, its secret-free first line,
        # and the traceback in the log.
        with caplog.at_level(logging.ERROR, logger="streamseg.console"):
            code, reply = call(port, "GET", "/api/fail")
        error, field, hint = _shape(reply)
        assert code == 500 and error.startswith("internal error: RuntimeError: lost redis://")
        assert "hunter2" not in error and "log" in str(hint)
        assert any(r.exc_info for r in caplog.records if "GET /api/fail" in r.getMessage())
    finally:
        server.close()
