"""The MQTT sink: the same JSON as Redis, on one topic per camera and one for alerts.

Detections of camera ``cam1`` go to ``<topic_prefix>/cam1/detections``,
alerts to ``<topic_prefix>/alerts``, at QoS 1 by default: a write of up to
``max_batch`` messages is done when the broker has acknowledged each one
(PUBACK). Buffering through outages and reconnecting come from
``BufferedSink``: when the broker goes away the whole write stays buffered
and is sent again on a new connection, so delivery is at least once.

What Frigate users expect besides (each can be turned off):

* ``<topic_prefix>/available``, retained: ``online`` once connected,
  ``offline`` when the sink closes, and ``offline`` from the broker (the
  connection's last will) when the process dies or the network goes;
* ``<topic_prefix>/<camera>/state``, retained: the objects the camera sees
  now and its health (``streamseg.publish.mqtt_state``), sent on change;
  the health comes from the runtime (``attach_health``);
* ``<topic_prefix>/<camera>/snapshot`` (off by default): each alert's
  snapshot JPEG, capped at ``snapshots.max_kb`` (``accepts("snapshot")``).

paho-mqtt runs the connection in its own network thread (``loop_start``)
with its automatic reconnect turned off; ``BufferedSink`` decides when to
reconnect. Each connection starts a clean session: what was not
acknowledged is sent again by this sink, not by paho.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from streamseg.publish.buffered import BufferedSink
from streamseg.publish.delivery import DeliveryOptions
from streamseg.publish.mqtt_state import CameraStates, fit_jpeg
from streamseg.publish.sink import CameraHealth, Message
from streamseg.publish.sink_config import MQTTSinkConfig
from streamseg.streams import availability_topic, mqtt_topic, state_topic

__all__ = ["MQTTSink", "build_sink"]

log = logging.getLogger("streamseg.publish")


class MQTTSink(BufferedSink):
    """Messages to an MQTT broker (paho-mqtt, MQTT 3.1.1).

    Args:
        config: the ``sinks:`` entry (broker, TLS, credentials, topics, QoS).
        **options: ``BufferedSink``'s (name, delivery, secrets).
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
        self._states = CameraStates(interval=config.state_interval) if config.state else None
        self._health: Callable[[], CameraHealth] | None = None
        self._closing = False
        self.snapshots_skipped = 0  # too large even scaled down
        if config.state:
            self.tick_interval = min(config.state_interval, 1.0)

    @property
    def availability_topic(self) -> str:
        return availability_topic(self.config.topic_prefix)

    def attach_health(self, health: Callable[[], CameraHealth], *, count_untracked: bool) -> None:
        """Where the cameras' health comes from: ``{camera: {state, since, reconnects,
        stalls, last_error, ...}}`` of the cameras served now (a camera missing from it
        has its retained state cleared); ``count_untracked``: tracking is off."""
        self._health = health
        if self._states is not None:
            self._states.count_untracked = count_untracked

    def accepts(self, kind: str) -> bool:
        return super().accepts(kind) or (kind == "snapshot" and self.config.snapshots.enabled)

    def submit(self, messages: Sequence[Message]) -> None:
        """As ``BufferedSink.submit``; snapshots are made to fit ``snapshots.max_kb`` first."""
        out = []
        for m in messages:
            if m.kind == "snapshot":
                fitted = self._fit_snapshot(m)
                if fitted is None:
                    continue
                m = fitted
            out.append(m)
        super().submit(out)

    def _fit_snapshot(self, m: Message) -> Message | None:
        snaps = self.config.snapshots
        if not snaps.enabled:
            return None
        data = fit_jpeg(m.data, snaps.max_kb * 1024)
        if data is None:
            self.snapshots_skipped += 1
            log.warning(
                "%s: a snapshot of %s is over %d KiB; not sent", self.name, m.camera, snaps.max_kb
            )
            return None
        return Message(m.kind, m.camera, data, m.frame, m.published_time)

    def topic(self, message: Message) -> str:
        """The topic of ``message``."""
        key = (message.kind, message.camera)
        topic = self._topics.get(key)
        if topic is None:
            topic = mqtt_topic(self.config.topic_prefix, message.kind, message.camera)
            self._topics[key] = topic
        return topic

    def close(self) -> int:
        """As ``BufferedSink.close``; then ``offline`` on the availability topic."""
        self._closing = True
        return super().close()

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
        if self.config.availability:
            self._publish_now(self.availability_topic, b"online", retain=True)
        if self._states is not None:
            self._states.forget_sent()  # the broker may have lost them: send them again

    def _write(self, batch: Sequence[Message]) -> list[BaseException | None]:
        import paho.mqtt.client as mqtt

        client, qos, retain = self._client, self.config.qos, self.config.retain
        results: list[BaseException | None] = []
        pending: list[int] = []
        with self._state:
            self._acked.clear()
        for m in batch:
            if m.kind == "detections" and self._states is not None:
                self._states.detections(m.camera, m.data)
            keep = self.config.snapshots.retain if m.kind == "snapshot" else retain
            try:
                info = client.publish(self.topic(m), m.data, qos=qos, retain=keep)
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

    def _tick(self) -> None:
        """Publish the cameras' states that changed (retained)."""
        if self._states is None:
            return
        health = self._health() if self._health is not None else None
        prefix = self.config.topic_prefix
        for camera, payload in self._states.due(health):
            self._publish_now(state_topic(prefix, camera), payload, retain=True)

    def _publish_now(self, topic: str, payload: bytes, *, retain: bool) -> None:
        """One message outside the buffer, waited for (raises when the broker is away)."""
        import paho.mqtt.client as mqtt

        with self._state:
            self._acked.clear()
        info = self._client.publish(topic, payload, qos=max(1, self.config.qos), retain=retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise ConnectionError(f"publish failed: {mqtt.error_string(info.rc)}")
        self._await_acks([info.mid])

    def _disconnect(self) -> None:
        if self._closing and self.config.availability and self._up:
            with contextlib.suppress(Exception):  # a clean stop: say so before the will does
                self._publish_now(self.availability_topic, b"offline", retain=True)
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
        if cfg.availability:  # the broker says offline for us when the connection is lost
            client.will_set(self.availability_topic, b"offline", qos=1, retain=True)
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
    return MQTTSink(config=cfg, name=name, delivery=DeliveryOptions.of(cfg), secrets=cfg.secrets())
