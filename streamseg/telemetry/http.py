"""``serve``'s web server: ``/healthz``, ``/readyz``, ``/metrics`` and whatever else is mounted.

* ``/healthz``: 200 while the process runs (liveness).
* ``/readyz``: JSON with every camera's health state, Redis and the model;
  200 when ready, 503 when not (readiness).
* ``/metrics``: the Prometheus exposition (when the metrics exporter is
  ``prometheus``).

The server is aiohttp, on its own asyncio loop in one thread (``http``), so
the pipeline's threads never wait on a client. Other parts add routes with
``setup(app)`` before it starts (the console: ``streamseg.console``).
The three probes above answer without a token: Kubernetes probes and
Prometheus scrapes call them bare, and they carry no secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

__all__ = ["HealthServer"]

log = logging.getLogger("streamseg.telemetry")

Readiness = Callable[[], tuple[bool, dict[str, Any]]]
MetricsText = Callable[[], tuple[bytes, str]]
AppSetup = Callable[[web.Application], None]

START_TIMEOUT = 10.0


class HealthServer:
    """An HTTP server thread answering health and metrics requests (and more routes).

    Args:
        host, port: where to listen (``port=0`` picks a free port; see ``port``).
        readiness: returns ``(ready, details)``.
        metrics: returns ``(body, content type)``, or ``None`` for no ``/metrics``.
        setup: adds routes and middlewares to the aiohttp application.

    ``start()`` raises ``OSError`` when the address cannot be bound (the
    port is in use), as the standard-library server did.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        readiness: Readiness,
        metrics: MetricsText | None,
        setup: AppSetup | None = None,
    ) -> None:
        self._host, self._port = host, port
        self.app = web.Application()
        self.app.router.add_get("/healthz", _healthz)
        self.app.router.add_get("/readyz", _readyz_handler(readiness))
        if metrics is not None:
            self.app.router.add_get("/metrics", _metrics_handler(metrics))
        if setup is not None:
            setup(self.app)
        self.app.router.add_route("*", "/{tail:.*}", _not_found)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._bound: tuple[str, int] | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        assert self._bound is not None, "start() first"
        return self._bound[1]

    @property
    def host(self) -> str:
        assert self._bound is not None, "start() first"
        return self._bound[0]

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def start(self) -> HealthServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        try:
            future.result(START_TIMEOUT)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            raise
        log.info(
            "http: listening on http://%s:%d (/healthz /readyz /metrics)", self.host, self.port
        )
        return self

    async def _start(self) -> None:
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server: Any = site._server  # an asyncio.Server: its sockets say the bound port
        name = server.sockets[0].getsockname()
        self._bound = (str(name[0]), int(name[1]))

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        if self._runner is not None:
            future = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            try:
                future.result(5)
            except Exception:
                log.warning("http: the server did not shut down cleanly", exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


async def _healthz(_request: web.Request) -> web.Response:
    return web.Response(body=b'{"status": "ok"}\n', content_type="application/json")


def _readyz_handler(readiness: Readiness) -> Callable[[web.Request], Any]:
    async def readyz(_request: web.Request) -> web.Response:
        ready, details = readiness()
        body = json.dumps({"ready": ready, **details}, indent=1).encode() + b"\n"
        return web.Response(
            status=200 if ready else 503, body=body, content_type="application/json"
        )

    return readyz


def _metrics_handler(metrics: MetricsText) -> Callable[[web.Request], Any]:
    async def handler(_request: web.Request) -> web.Response:
        body, ctype = metrics()
        return web.Response(body=body, headers={"Content-Type": ctype})

    return handler


async def _not_found(_request: web.Request) -> web.Response:
    return web.Response(
        status=404, body=b'{"error": "not found"}\n', content_type="application/json"
    )
