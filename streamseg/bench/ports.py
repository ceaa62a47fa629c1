"""Loopback ports, and the end of a process, for the local servers that benchmarks,
scripts and tests start."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import time

__all__ = ["end_process", "free_port", "wait_for_port"]


# Ports below the kernel's ephemeral range: the OS never hands these out to an
# outgoing connection or to bind(0), so a port chosen here stays free until its
# server binds it (a port of the ephemeral range can be taken meanwhile by any
# client's connection, and a server then fails with "address in use").
_LOWEST = 10_000


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now: a random one below the kernel's
    ephemeral range where there is room, else one the OS hands out."""
    top = _ephemeral_start()
    for _ in range(100 if top - _LOWEST > 1000 else 0):
        port = random.randrange(_LOWEST, top)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
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


def end_process(
    proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None,
    sig: int = signal.SIGTERM,
    timeout: float = 10.0,
) -> None:
    """Send ``sig`` to ``proc`` if it still runs, wait up to ``timeout`` seconds for it
    to end, then kill it (a server that will not stop must not outlive its user)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
