"""Loopback ports for the local servers that benchmarks, scripts and tests start."""

from __future__ import annotations

import socket
import time

__all__ = ["free_port", "wait_for_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS just handed out as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    """Until something accepts connections on 127.0.0.1:``port`` (else ``TimeoutError``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")
