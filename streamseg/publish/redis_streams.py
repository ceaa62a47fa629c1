"""The Redis Streams sink: pipelined ``XADD``, one stream per camera plus the alerts stream.

Each write is one pipelined round trip of up to ``max_batch`` entries
``XADD <stream> MAXLEN ~ <maxlen> * data <json>``, to
``<prefix>:detections:<camera>`` (``maxlen``) or ``<prefix>:alerts``
(``alerts_maxlen``). Buffering through outages and reconnecting come from
``BufferedSink``.

The commands are written in the Redis protocol (RESP) by this module, all
of a batch in one send, on a connection the sink keeps from its client's
pool (so TLS and authentication are redis-py's); each reply is read with
redis-py's parser (hiredis). That is about a third of the CPU time per
message of redis-py's own pipeline, which builds every command argument by
argument (``python -m streamseg.bench.publish``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from streamseg.publish.buffered import BufferedSink
from streamseg.publish.connect import redis_client
from streamseg.publish.delivery import DeliveryOptions
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.sink import Message
from streamseg.streams import alerts_stream, detections_stream

__all__ = ["RedisStreamsSink", "build_sink"]


class RedisStreamsSink(BufferedSink):
    """Messages to Redis Streams.

    Args:
        client_factory: returns a new redis-py client (no retries of its own).
        stream_prefix: streams are ``<prefix>:detections:<camera>`` and ``<prefix>:alerts``.
        maxlen / alerts_maxlen: approximate stream lengths kept by Redis.
        **options: ``BufferedSink``'s (name, delivery, secrets).
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
        self._conn: Any = None  # a connection of the client's pool, kept for writes
        self._prefix = stream_prefix
        self._maxlen, self._alerts_maxlen = maxlen, alerts_maxlen
        self._heads: dict[tuple[str, str], bytes] = {}  # (kind, camera) -> packed command head

    def stream(self, message: Message) -> tuple[str, int]:
        """``(stream name, maxlen)`` of ``message``."""
        if message.kind == "alert":
            return alerts_stream(self._prefix), self._alerts_maxlen
        return detections_stream(self._prefix, message.camera), self._maxlen

    def destination(self, message: Message) -> str:
        return self.stream(message)[0]

    def _connect(self) -> None:
        if self._client is None:
            self._client = self._factory()
        if self._conn is None:
            self._conn = self._client.connection_pool.get_connection()  # connects (TLS, AUTH)
        self._conn.send_command("PING")
        self._conn.read_response()

    def _write(self, batch: Sequence[Message]) -> list[BaseException | None]:
        import redis

        conn = self._conn
        packed = b"".join([self._head(m) + b"$%d\r\n%b\r\n" % (len(m.data), m.data) for m in batch])
        conn.send_packed_command([packed], check_health=False)
        results: list[BaseException | None] = []
        for _ in batch:
            try:
                conn.read_response(disable_decoding=True)
            except redis.ResponseError as exc:  # this entry refused; the next replies follow
                results.append(exc)
            else:
                results.append(None)
        return results

    def _head(self, m: Message) -> bytes:
        """``XADD <stream> MAXLEN ~ <maxlen> * data`` in RESP, without the value."""
        key = (m.kind, m.camera)
        head = self._heads.get(key)
        if head is None:
            stream, maxlen = self.stream(m)
            head = _resp_head(["XADD", stream, "MAXLEN", "~", str(maxlen), "*", "data"], 1)
            self._heads[key] = head
        return head

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        client, self._client = self._client, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.disconnect()
            with contextlib.suppress(Exception):
                client.connection_pool.release(conn)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


def _resp_head(args: Sequence[str], more: int) -> bytes:
    """A RESP array header for ``len(args) + more`` bulk strings, then ``args``."""
    out = [b"*%d\r\n" % (len(args) + more)]
    for arg in args:
        raw = arg.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(out)


def build_sink(cfg: RedisConfig, *, name: str = "redis") -> RedisStreamsSink:
    """The sink of a ``redis:`` section (or a ``sinks:`` entry of type ``redis``)."""
    return RedisStreamsSink(
        name=name,
        client_factory=lambda: redis_client(cfg),
        stream_prefix=cfg.stream_prefix,
        maxlen=cfg.maxlen,
        alerts_maxlen=cfg.alerts_maxlen,
        delivery=DeliveryOptions.of(cfg),
        secrets=cfg.secrets(),
    )
