"""A real HTTP file server on loopback, with byte ranges and scripted failures.

``FileServer`` serves in-memory files over ``http.server`` in a thread on a
free 127.0.0.1 port: ``GET`` with ``Range: bytes=N-`` answers 206 with a
``Content-Range`` (416 past the end), unknown paths 404. Tests script the
failures a download must survive: ``cut_once[path] = n`` sends the full
``Content-Length`` but closes the connection after ``n`` body bytes (once);
``ignore_range`` answers every request with the whole file (200). Every
request's path and ``Range`` header are recorded in ``requests``.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-$")


class FileServer:
    """Serves ``files`` (path -> bytes) on ``http://127.0.0.1:<port>/``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut_once: dict[str, int] = {}
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self) -> FileServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _take_cut(self, path: str) -> int | None:
        with self._lock:
            return self.cut_once.pop(path, None)


def _handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: pytest shows failures, not access logs

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            header = self.headers.get("Range")
            server.requests.append((path, header))
            data = server.files.get(path)
            if data is None:
                self._reply(404, b"not found\n")
                return
            match = _RANGE.match(header or "")
            start = int(match.group(1)) if match and not server.ignore_range else 0
            if start >= len(data) and start:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = data[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            cut = server._take_cut(path)
            if cut is not None:
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
