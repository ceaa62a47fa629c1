"""The Redis Streams sink: pipelined ``XADD``, one stream per camera plus the alerts stream.

Each write is one pipelined round trip of up to ``max_batch`` entries
``XADD <stream> MAXLEN ~ <maxlen> * data <json>``, to
``<prefix>:detections:<camera>`` (``maxlen``) or ``<prefix>:alerts``
(``alerts_maxlen``). Buffering through outages and reconnecting come from
``BufferedSink``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from streamseg.config.redis import RedisConfig
from streamseg.publish.connect import redis_client
from streamseg.publish.sink import BufferedSink, Message

__all__ = ["RedisStreamsSink", "build_sink"]


class RedisStreamsSink(BufferedSink):
    """Messages to Redis Streams.

    Args:
        client_factory: returns a new redis-py client (no retries of its own).
        stream_prefix: streams are ``<prefix>:detections:<camera>`` and ``<prefix>:alerts``.
        maxlen / alerts_maxlen: approximate stream lengths kept by Redis.
        **options: ``BufferedSink``'s (name, buffer_max, max_batch, backoff, secrets).
    """

    type = "redis"
    write_op = "xadd"

    def __init__(
        self,
        *,
        client_factory: Callable[[], Any],
        stream_prefix: str = "streamseg",
        maxlen: int = 10_000,
        alerts_maxlen: int = 100_000,
        **options: Any,
    ) -> None:
        options.setdefault("name", "redis")
        super().__init__(**options)
        self._factory = client_factory
        self._client: Any = None
        self._prefix = stream_prefix
        self._maxlen, self._alerts_maxlen = maxlen, alerts_maxlen

    def stream(self, message: Message) -> tuple[str, int]:
        """``(stream name, maxlen)`` of ``message``."""
        if message.kind == "alert":
            return f"{self._prefix}:alerts", self._alerts_maxlen
        return f"{self._prefix}:detections:{message.camera}", self._maxlen

    def _connect(self) -> None:
        if self._client is None:
            self._client = self._factory()
        self._client.ping()

    def _write(self, batch: Sequence[Message]) -> list[BaseException | None]:
        pipe = self._client.pipeline(transaction=False)
        for m in batch:
            stream, maxlen = self.stream(m)
            pipe.xadd(stream, {"data": m.data}, maxlen=maxlen, approximate=True)
        results = pipe.execute(raise_on_error=False)
        return [r if isinstance(r, Exception) else None for r in results]

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


def build_sink(cfg: RedisConfig, *, name: str = "redis") -> RedisStreamsSink:
    """The sink of a ``redis:`` section (or a ``sinks:`` entry of type ``redis``)."""
    secrets = [cfg.password.get_secret_value()] if cfg.password is not None else []
    return RedisStreamsSink(
        name=name,
        client_factory=lambda: redis_client(cfg),
        stream_prefix=cfg.stream_prefix,
        maxlen=cfg.maxlen,
        alerts_maxlen=cfg.alerts_maxlen,
        buffer_max=cfg.buffer_max_messages,
        max_batch=cfg.max_batch,
        reconnect_initial=cfg.reconnect_initial,
        reconnect_max=cfg.reconnect_max,
        secrets=secrets,
    )
