"""Real servers for tests: redis-server, mosquitto, on free loopback ports.

The servers themselves live in ``streamseg.bench`` (the soak script and the
benchmarks start them too); this module adds what only tests need:
certificates made by openssl for the TLS tests (``make_tls_files``),
``wait_blocked`` and the environment for running ``python -m streamseg``.
Tests talk to real processes, never to stand-ins.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from streamseg.bench.mqtt_server import MosquittoServer, MQTTSubscriber
from streamseg.bench.ports import free_port, wait_for_port
from streamseg.bench.redis_server import RedisServer, TLSFiles

__all__ = [
    "MQTTSubscriber",
    "MosquittoServer",
    "RedisServer",
    "TLSFiles",
    "cli_env",
    "free_port",
    "make_tls_files",
    "wait_blocked",
    "wait_for_port",
]


def wait_blocked(server: RedisServer, command: str, timeout: float = 10.0) -> None:
    """Until a client of ``server`` is blocked in ``command`` (e.g. ``xread``: a reader
    that has taken its position in the streams)."""
    client = server.client()
    deadline = time.monotonic() + timeout
    while not any(c.get("cmd") == command for c in client.client_list()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no client blocked in {command} after {timeout}s")
        time.sleep(0.02)


def make_tls_files(folder: Path, name: str = "test-ca") -> TLSFiles:
    """A new CA (``name``) and the certificates it signs, written by openssl."""
    exe = shutil.which("openssl")
    if exe is None:
        pytest.fail("openssl is not installed: `apt-get install openssl`")
    folder.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([exe, *args], cwd=folder, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", f"/CN={name}")  # fmt: skip
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out",
            f"{who}.csr", "-subj", f"/CN={who}")  # fmt: skip
        run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{who}.crt", "-days", "2",
            "-extfile", "san.cnf")  # fmt: skip
    return TLSFiles(
        ca=folder / "ca.crt",
        server_cert=folder / "server.crt",
        server_key=folder / "server.key",
        client_cert=folder / "client.crt",
        client_key=folder / "client.key",
    )


def cli_env() -> dict[str, str]:
    """Environment for running ``python -m streamseg`` from the repository."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    return env
