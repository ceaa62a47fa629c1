"""A throw-away local mosquitto broker and a subscriber that keeps what it gets.

For benchmarks, scripts (the soak) and tests: ``MosquittoServer`` runs on
127.0.0.1 and a free port, can be restarted on the same port, and keeps
sessions and queued messages across a restart; ``MQTTSubscriber`` records
every message of a topic at QoS 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from streamseg.bench.ports import end_process, free_port, wait_for_port
from streamseg.bench.redis_server import TLSFiles

__all__ = ["MQTTSubscriber", "MosquittoServer"]


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
            raise RuntimeError(
                "mosquitto is not installed: run scripts/setup.sh --dev "
                "or `apt-get install mosquitto`"
            )
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
        end_process(self.proc)  # SIGTERM: it saves sessions and queued messages
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
            client_id=f"sub-{free_port()}",
            clean_session=not persistent,
        )
        # paho types the delays as int; it sleeps any float, and a tenth of a
        # second keeps a broker restart short.
        self.client.reconnect_delay_set(0.1, 0.5)  # type: ignore[arg-type]
        if username is not None:
            self.client.username_pw_set(username, password)
        if server.tls is not None:
            self.client.tls_set(
                ca_certs=str(server.tls.ca),
                certfile=str(server.tls.client_cert),
                keyfile=str(server.tls.client_key),
            )

        def on_connect(client, userdata, flags, reason, props):
            client.subscribe(topic, qos=1)

        def on_subscribe(client, userdata, mid, reasons, props):
            self._subscribed.set()

        def on_message(client, userdata, msg):
            with self._lock:
                self.messages.append((msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain)))

        self.client.on_connect = on_connect
        self.client.on_subscribe = on_subscribe
        self.client.on_message = on_message
        self.client.connect("127.0.0.1", server.port, keepalive=10)
        self.client.loop_start()
        if not self._subscribed.wait(10):
            raise TimeoutError("the MQTT subscriber could not subscribe")

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
