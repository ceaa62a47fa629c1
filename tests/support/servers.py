"""Real servers for tests: redis-server on a free loopback port.

Tests talk to real processes, never to stand-ins. ``RedisServer`` can be
stopped and started again on the same port to test reconnection, and can
speak TLS only (certificates made by ``make_tls_files`` with openssl).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@dataclass(frozen=True)
class TLSFiles:
    """PEM files of a throw-away CA, a server certificate for 127.0.0.1, a client one."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


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


class RedisServer:
    """A redis-server subprocess bound to 127.0.0.1 on a fixed free port.

    With ``tls``, it listens for TLS only (``rediss://``); ``client_certs``
    makes it require a client certificate signed by the same CA. With
    ``persist``, it keeps its data across stop()/start() (an append-only
    file synced on every write, in ``workdir``).
    """

    def __init__(
        self,
        workdir: Path,
        password: str | None = None,
        tls: TLSFiles | None = None,
        client_certs: bool = False,
        persist: bool = False,
    ) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail(
                "redis-server is not installed: run .ci/run or `apt-get install redis-server`"
            )
        self.exe = exe
        self.port = free_port()
        self.workdir = workdir
        self.password = password
        self.tls = tls
        self.client_certs = client_certs
        self.persist = persist
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if self.tls:
            ports = ["--port", "0", "--tls-port", str(self.port)]
            ports += ["--tls-cert-file", str(self.tls.server_cert)]
            ports += ["--tls-key-file", str(self.tls.server_key)]
            ports += ["--tls-ca-cert-file", str(self.tls.ca)]
            ports += ["--tls-auth-clients", "yes" if self.client_certs else "no"]
        else:
            ports = ["--port", str(self.port)]
        args = [
            self.exe,
            *ports,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.persist else "no",
            "--appendfsync",
            "always",
            "--dir",
            str(self.workdir),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        if self.tls is None:
            return redis.Redis.from_url(self.url, decode_responses=False)
        return redis.Redis.from_url(
            self.url,
            decode_responses=False,
            ssl_ca_certs=str(self.tls.ca),
            ssl_certfile=str(self.tls.client_cert),
            ssl_keyfile=str(self.tls.client_key),
        )


def cli_env() -> dict[str, str]:
    """Environment for running ``python -m streamseg`` from the repository."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    return env
