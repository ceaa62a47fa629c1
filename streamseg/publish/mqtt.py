"""The MQTT sink: the same JSON as Redis, on one topic per camera and one for alerts.

Detections of camera ``cam1`` go to ``<topic_prefix>/cam1/detections``,
alerts to ``<topic_prefix>/alerts``, at QoS 1 by default: a write of up to
``max_batch`` messages is done when the broker has acknowledged each one
(PUBACK). Buffering through outages and reconnecting come from
``BufferedSink``: when the broker goes away the whole write stays buffered
and is sent again on a new connection, so delivery is at least once.

paho-mqtt runs the connection in its own network thread (``loop_start``)
with its automatic reconnect turned off; ``BufferedSink`` decides when to
reconnect. Each connection starts a clean session: what was not
acknowledged is sent again by this sink, not by paho.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any

from streamseg.config.sinks import MQTTSinkConfig
from streamseg.publish.sink import BufferedSink, Message

__all__ = ["MQTTSink", "build_sink"]


class MQTTSink(BufferedSink):
    """Messages to an MQTT broker (paho-mqtt, MQTT 3.1.1).

    Args:
        config: the ``sinks:`` entry (broker, TLS, credentials, topics, QoS).
        **options: ``BufferedSink``'s (name, buffer_max, max_batch, backoff, secrets).
    """

    type = "mqtt"
    write_op = "publish"

    def __init__(self, *, config: MQTTSinkConfig, **options: Any) -> None:
        options.setdefault("name", config.name)
        super().__init__(**options)
        self.config = config
        self._client: Any = None
        self._state = threading.Condition()  # paho's callbacks -> the writer thread
        self._up = False  # CONNACK accepted and no disconnect since
        self._refused: str | None = None  # why the broker refused the connection
        self._topics: dict[tuple[str, str], str] = {}
        self._acked: set[int] = set()  # message ids the broker acknowledged in this write

    def topic(self, message: Message) -> str:
        """The topic of ``message``."""
        key = (message.kind, message.camera)
        topic = self._topics.get(key)
        if topic is None:
            prefix = self.config.topic_prefix
            if message.kind == "alert":
                topic = f"{prefix}/alerts"
            else:
                topic = f"{prefix}/{message.camera}/{message.kind}"
            self._topics[key] = topic
        return topic

    def destination(self, message: Message) -> str:
        return self.topic(message)

    # -- BufferedSink ---------------------------------------------------------------
    def _connect(self) -> None:
        client = self._new_client()
        host, port = self.config.host_port
        with self._state:
            self._up, self._refused = False, None
        self._client = client
        client.connect(host, port, keepalive=self.config.keepalive)  # TCP (and TLS) now
        client.loop_start()
        deadline = time.monotonic() + self.config.socket_timeout
        with self._state:
            while not self._up and self._refused is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no CONNACK within {self.config.socket_timeout}s")
                self._state.wait(left)
            if self._refused is not None:
                raise ConnectionRefusedError(f"broker refused the connection: {self._refused}")

    def _write(self, batch: Sequence[Message]) -> list[BaseException | None]:
        import paho.mqtt.client as mqtt

        client, qos, retain = self._client, self.config.qos, self.config.retain
        results: list[BaseException | None] = []
        pending: list[int] = []
        with self._state:
            self._acked.clear()
        for m in batch:
            try:
                info = client.publish(self.topic(m), m.data, qos=qos, retain=retain)
            except ValueError as exc:  # this message can never be sent (too large)
                results.append(exc)
                continue
            if info.rc != mqtt.MQTT_ERR_SUCCESS:
                raise ConnectionError(f"publish failed: {mqtt.error_string(info.rc)}")
            results.append(None)
            pending.append(info.mid)
        self._await_acks(pending)
        return results

    def _await_acks(self, pending: Sequence[int]) -> None:
        """Wait until the broker acknowledged every message; raise when it went away."""
        deadline = time.monotonic() + self.config.socket_timeout
        with self._state:
            while True:
                if self._acked.issuperset(pending):
                    return
                if not self._up:
                    raise ConnectionError("the broker closed the connection")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no PUBACK within {self.config.socket_timeout}s")
                self._state.wait(left)

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        with self._state:
            self._up = False
        if client is not None:
            with contextlib.suppress(Exception):
                client.disconnect()
            with contextlib.suppress(Exception):
                client.loop_stop()

    # -- paho -------------------------------------------------------------------------
    def _new_client(self) -> Any:
        import paho.mqtt.client as mqtt

        cfg = self.config
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=cfg.client_id or f"streamseg-{self.name}-{os.getpid()}",
            clean_session=True,
            protocol=mqtt.MQTTv311,
            reconnect_on_failure=False,
        )
        client.max_inflight_messages_set(max(20, min(self._max_batch, 1000)))
        if cfg.username is not None or cfg.password is not None:
            password = cfg.password.get_secret_value() if cfg.password is not None else None
            client.username_pw_set(cfg.username or "", password)
        if cfg.use_tls:
            client.tls_set(
                ca_certs=cfg.tls.ca_file,
                certfile=cfg.tls.cert_file,
                keyfile=cfg.tls.key_file,
                cert_reqs=ssl.CERT_REQUIRED if cfg.tls.verify else ssl.CERT_NONE,
            )
            client.tls_insecure_set(not cfg.tls.verify)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        return client

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        with self._state:
            if reason.is_failure:
                self._refused = str(reason)
            else:
                self._up = True
            self._state.notify_all()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        with self._state:
            self._up = False
            self._refused = self._refused or f"disconnected ({reason})"
            self._state.notify_all()

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        with self._state:
            self._acked.add(mid)
            self._state.notify_all()


def build_sink(cfg: MQTTSinkConfig, *, name: str = "mqtt") -> MQTTSink:
    """The sink of a ``sinks:`` entry of type ``mqtt``."""
    secrets = [cfg.password.get_secret_value()] if cfg.password is not None else []
    return MQTTSink(
        config=cfg,
        name=name,
        buffer_max=cfg.buffer_max_messages,
        max_batch=cfg.max_batch,
        reconnect_initial=cfg.reconnect_initial,
        reconnect_max=cfg.reconnect_max,
        secrets=secrets,
    )
