"""Real servers for tests: redis-server and mosquitto on free loopback ports.

Tests talk to real processes, never to stand-ins. ``RedisServer`` and
``MosquittoServer`` can be stopped and started again on the same port to
test reconnection, and can speak TLS only (certificates made by
``make_tls_files`` with openssl).
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


def wait_blocked(server: RedisServer, command: str, timeout: float = 10.0) -> None:
    """Until a client of ``server`` is blocked in ``command`` (e.g. ``xread``: a reader
    that has taken its position in the streams)."""
    client = server.client()
    deadline = time.monotonic() + timeout
    while not any(c.get("cmd") == command for c in client.client_list()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no client blocked in {command} after {timeout}s")
        time.sleep(0.02)


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


class MosquittoServer:
    """A mosquitto broker bound to 127.0.0.1 on a fixed free port, with its own config.

    It keeps sessions and queued QoS 1 messages across stop()/start()
    (persistence in ``workdir``), so a subscriber with a persistent session
    misses nothing while the broker restarts. ``users`` (name -> password)
    turns anonymous access off; ``tls`` makes it listen for TLS only, and
    ``client_certs`` requires a client certificate signed by the same CA.
    """

    def __init__(
        self,
        workdir: Path,
        users: dict[str, str] | None = None,
        tls: TLSFiles | None = None,
        client_certs: bool = False,
    ) -> None:
        exe = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin")
        if exe is None:
            pytest.fail("mosquitto is not installed: run .ci/run or `apt-get install mosquitto`")
        self.exe = exe
        self.port = free_port()
        self.workdir = workdir
        self.users = users or {}
        self.tls = tls
        self.client_certs = client_certs
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf = self._write_config()

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        lines = [
            f"listener {self.port} 127.0.0.1",
            "persistence true",
            f"persistence_location {self.workdir}/",
            "autosave_interval 1",
            "max_queued_messages 100000",
            f"allow_anonymous {'false' if self.users else 'true'}",
        ]
        if os.geteuid() == 0:
            lines.append("user root")  # read this test's files; no switch to user mosquitto
        if self.users:
            pw = self.workdir / "passwords"
            pw.write_text("".join(f"{u}:{p}\n" for u, p in self.users.items()))
            subprocess.run(["mosquitto_passwd", "-U", str(pw)], check=True, capture_output=True)
            lines.append(f"password_file {pw}")
        if self.tls:
            lines += [f"cafile {self.tls.ca}", f"certfile {self.tls.server_cert}"]
            lines += [f"keyfile {self.tls.server_key}"]
            lines.append(f"require_certificate {'true' if self.client_certs else 'false'}")
        conf = self.workdir / "mosquitto.conf"
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "-c", str(self.conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # saves sessions and queued messages
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class MQTTSubscriber:
    """A paho subscriber to ``topic`` at QoS 1 that keeps every message it receives.

    With ``persistent`` (the default) its session outlives disconnects and
    broker restarts (clean_session=False, a fixed client id): the broker
    queues what is published meanwhile. It reconnects by itself.
    """

    def __init__(
        self,
        server: MosquittoServer,
        topic: str = "#",
        *,
        persistent: bool = True,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        import threading

        import paho.mqtt.client as mqtt

        self.messages: list[tuple[str, bytes, int, bool]] = []  # topic, payload, qos, retain
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"test-sub-{free_port()}",
            clean_session=not persistent,
        )
        self.client.reconnect_delay_set(0.1, 0.5)
        if username is not None:
            self.client.username_pw_set(username, password)
        if server.tls is not None:
            self.client.tls_set(
                ca_certs=str(server.tls.ca),
                certfile=str(server.tls.client_cert),
                keyfile=str(server.tls.client_key),
            )

        def on_connect(client, userdata, flags, reason, props):  # type: ignore[no-untyped-def]
            client.subscribe(topic, qos=1)

        def on_subscribe(client, userdata, mid, reasons, props):  # type: ignore[no-untyped-def]
            self._subscribed.set()

        def on_message(client, userdata, msg):  # type: ignore[no-untyped-def]
            with self._lock:
                self.messages.append((msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain)))

        self.client.on_connect = on_connect
        self.client.on_subscribe = on_subscribe
        self.client.on_message = on_message
        self.client.connect("127.0.0.1", server.port, keepalive=10)
        self.client.loop_start()
        if not self._subscribed.wait(10):
            raise TimeoutError("the test subscriber could not subscribe")

    def received(self, topic: str | None = None) -> list[bytes]:
        with self._lock:
            return [p for t, p, _q, _r in self.messages if topic is None or t == topic]

    def wait_for(self, count: int, topic: str | None = None, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received(topic)) < count:
            if time.monotonic() > deadline:
                got = len(self.received(topic))
                raise AssertionError(f"{got} of {count} MQTT messages arrived on {topic or '#'}")
            time.sleep(0.02)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def cli_env() -> dict[str, str]:
    """Environment for running ``python -m streamseg`` from the repository."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    return env
