"""``/healthz``, ``/readyz`` and ``/metrics`` over the standard library's HTTP server.

* ``/healthz``: 200 while the process runs (liveness).
* ``/readyz``: JSON with every camera's health state, Redis and the model;
  200 when ready, 503 when not (readiness).
* ``/metrics``: the Prometheus exposition (when the metrics exporter is
  ``prometheus``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HealthServer"]

log = logging.getLogger("streamseg.telemetry")

Readiness = Callable[[], tuple[bool, dict[str, Any]]]
MetricsText = Callable[[], tuple[bytes, str]]


class HealthServer:
    """An HTTP server thread answering health and metrics requests.

    Args:
        host, port: where to listen (``port=0`` picks a free port; see ``port``).
        readiness: returns ``(ready, details)``.
        metrics: returns ``(body, content type)``, or ``None`` for no ``/metrics``.
    """

    def __init__(
        self, *, host: str, port: int, readiness: Readiness, metrics: MetricsText | None
    ) -> None:
        handler = _make_handler(readiness, metrics)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", kwargs={"poll_interval": 0.2}
        )
        self._thread.daemon = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    def start(self) -> HealthServer:
        self._thread.start()
        log.info(
            "http: listening on http://%s:%d (/healthz /readyz /metrics)", self.host, self.port
        )
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _make_handler(readiness: Readiness, metrics: MetricsText | None) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "streamseg"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._send(200, b'{"status": "ok"}\n', "application/json")
            elif path == "/readyz":
                ready, details = readiness()
                body = json.dumps({"ready": ready, **details}, indent=1).encode() + b"\n"
                self._send(200 if ready else 503, body, "application/json")
            elif path == "/metrics" and metrics is not None:
                body, ctype = metrics()
                self._send(200, body, ctype)
            else:
                self._send(404, b'{"error": "not found"}\n', "application/json")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http: " + format, *args)

    return Handler
