"""A TCP forwarder that can cut its connections: a worker cut off from Redis, for real.

``TcpProxy(target_port).start()`` listens on a free local port and forwards
every connection to ``127.0.0.1:target_port``. ``cut()`` closes every
connection and refuses new ones (each is accepted and closed at once, like
a network that resets), until ``restore()``.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``host:target_port`` in one thread."""

    def __init__(self, target_port: int, *, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._peers: dict[socket.socket, socket.socket] = {}
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> TcpProxy:
        self._listener.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ)
        self._thread.start()
        return self

    def cut(self) -> None:
        """Reset every connection and refuse new ones."""
        self._cut.set()

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for s in list(self._peers):
            self._drop(s)
        self._listener.close()

    def _run(self) -> None:
        while not self._closed.is_set():
            if self._cut.is_set() and self._peers:
                for s in list(self._peers):
                    self._drop(s)
            for key, _ in self._sel.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                elif sock in self._peers:
                    self._pump(sock)

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            client, _ = self._listener.accept()
            if self._cut.is_set():
                client.close()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                return
            for s in (client, upstream):
                s.setblocking(False)
                self._sel.register(s, selectors.EVENT_READ)
            self._peers[client], self._peers[upstream] = upstream, client

    def _pump(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        try:
            self._peers[sock].setblocking(True)
            self._peers[sock].sendall(data)
            self._peers[sock].setblocking(False)
        except OSError:
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        other = self._peers.pop(sock, None)
        for s in (sock, other):
            if s is None:
                continue
            self._peers.pop(s, None)
            with contextlib.suppress(Exception):
                self._sel.unregister(s)
            with contextlib.suppress(OSError):
                s.close()
