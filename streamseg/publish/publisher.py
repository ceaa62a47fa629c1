"""Writing messages to Redis Streams: pipelined, buffered through outages, in order.

``RedisPublisher`` keeps one FIFO buffer of outgoing entries. Each flush
sends up to ``max_batch`` of them with one pipelined round trip of
``XADD stream MAXLEN ~ maxlen * data <json>``. When Redis does not answer,
entries stay buffered (at most ``buffer_max``; beyond that the oldest are
dropped and counted) and a reconnect is tried with exponential backoff and
jitter; once Redis is back the buffer drains in its original order. The
publisher never blocks its caller for longer than one connection attempt.

Delivery is at least once: an outage in the middle of a round trip can
leave some entries written and still buffered, and those are sent again.

Every failed Redis call is reported to ``on_error(op, kind)``: ``op`` is
``connect`` (the ``PING`` of a connection attempt) or ``xadd`` (a pipelined
round trip that failed, or one entry Redis rejected), ``kind`` the
exception's class name (``ConnectionError``, ``TimeoutError``,
``AuthenticationError``, ``ResponseError``, ...), never its message, which
may name the server. Every connection attempt made after Redis was lost (or
never reached) is reported to ``on_reconnect(ok)``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from streamseg.redact import redact_text
from streamseg.types import Frame

__all__ = ["Outgoing", "RedisPublisher"]

log = logging.getLogger("streamseg.publish")


@dataclasses.dataclass(frozen=True)
class Outgoing:
    """One stream entry to write: ``XADD stream MAXLEN ~ maxlen * data <data>``.

    ``kind`` is ``detections`` or ``alert``; ``frame`` (pixels dropped) is
    the frame a detections entry describes, for latency and tracing.
    """

    stream: str
    data: bytes
    maxlen: int
    kind: str
    frame: Frame | None = None


Callback = Callable[[Sequence[Outgoing]], None]
ErrorCallback = Callable[[str, str], None]  # (op, error kind)
ReconnectCallback = Callable[[bool], None]  # (attempt succeeded)


class RedisPublisher:
    """A buffered, reconnecting Redis Streams writer (one thread uses it).

    Args:
        client_factory: returns a new redis-py client (no retries of its own).
        buffer_max: entries kept while Redis is away.
        max_batch: entries per pipelined round trip.
        reconnect_initial / reconnect_max: backoff bounds, seconds.
        jitter: random fraction (+-) applied to each backoff.
        on_published / on_dropped: called with entries Redis acknowledged /
            entries given up on (buffer overflow or rejected by Redis).
        on_error: called with ``(op, kind)`` for every failed Redis call
            (see the module docstring).
        on_reconnect: called with ``True``/``False`` after every connection
            attempt made while Redis is away.
        secrets: strings (passwords) scrubbed from logged error messages.
    """

    def __init__(
        self,
        *,
        client_factory: Callable[[], Any],
        buffer_max: int = 10_000,
        max_batch: int = 256,
        reconnect_initial: float = 0.2,
        reconnect_max: float = 10.0,
        jitter: float = 0.2,
        on_published: Callback | None = None,
        on_dropped: Callback | None = None,
        on_error: ErrorCallback | None = None,
        on_reconnect: ReconnectCallback | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self._factory = client_factory
        self._client: Any = None
        self._buffer: collections.deque[Outgoing] = collections.deque()
        self._buffer_max = buffer_max
        self._max_batch = max_batch
        self._initial, self._max, self._jitter = reconnect_initial, reconnect_max, jitter
        self.on_published = on_published
        self.on_dropped = on_dropped
        self.on_error = on_error
        self.on_reconnect = on_reconnect
        self._secrets = tuple(secrets)
        self._lock = threading.Lock()  # guards counters read by other threads
        self.connected = False
        self.published = 0
        self.dropped = 0
        self.errors = 0  # failed Redis calls
        self.reconnects = 0  # successful reconnections
        self.reconnect_attempts = 0  # connection attempts while Redis was away
        self._failures = 0
        self._next_attempt = 0.0
        self._down_since: float | None = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def connect(self) -> bool:
        """Try to reach Redis now (``PING``); on failure schedule a retry."""
        retrying = self._down_since is not None
        try:
            if self._client is None:
                self._client = self._factory()
            self._client.ping()
        except Exception as exc:
            self._failed(exc, "connect")
            ok = False
        else:
            self._succeeded()
            ok = True
        if retrying:
            with self._lock:
                self.reconnect_attempts += 1
            if self.on_reconnect is not None:
                self.on_reconnect(ok)
        return ok

    def submit(self, entries: Sequence[Outgoing]) -> None:
        """Buffer ``entries`` (oldest dropped beyond ``buffer_max``) and flush if due."""
        self._buffer.extend(entries)
        overflow = len(self._buffer) - self._buffer_max
        if overflow > 0:
            gone = [self._buffer.popleft() for _ in range(overflow)]
            self._drop(gone, "buffer full while Redis is away")
        self.poll()

    def retry_in(self) -> float | None:
        """Seconds until the next reconnect attempt, or ``None`` when none is pending."""
        if self.connected:
            return None
        return max(0.0, self._next_attempt - time.monotonic())

    def poll(self) -> None:
        """Send what is buffered, if connected or a reconnect attempt is due."""
        if not self.connected and (time.monotonic() < self._next_attempt or not self.connect()):
            return
        while self._buffer and self.connected:
            self._send(list(self._take(self._max_batch)))

    def flush(self, timeout: float) -> bool:
        """Keep trying to empty the buffer for up to ``timeout`` seconds (shutdown)."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if not self._buffer:
                return True
            wait = self.retry_in() or 0.05
            if time.monotonic() + wait > deadline:
                return False
            time.sleep(wait)

    def discard(self) -> int:
        """Give up on everything still buffered (shutdown): dropped, counted, reported."""
        gone = list(self._buffer)
        self._buffer.clear()
        if gone:
            self._drop(gone, "shutting down while Redis is away")
        return len(gone)

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None

    def _take(self, n: int) -> list[Outgoing]:
        return [self._buffer[i] for i in range(min(n, len(self._buffer)))]

    def _send(self, chunk: list[Outgoing]) -> None:
        import redis

        pipe = self._client.pipeline(transaction=False)
        for e in chunk:
            pipe.xadd(e.stream, {"data": e.data}, maxlen=e.maxlen, approximate=True)
        try:
            results = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            self._failed(exc, "xadd")
            return
        for _ in chunk:
            self._buffer.popleft()
        ok = [e for e, r in zip(chunk, results, strict=True) if not isinstance(r, Exception)]
        bad = [(e, r) for e, r in zip(chunk, results, strict=True) if isinstance(r, Exception)]
        with self._lock:
            self.published += len(ok)
        if bad:
            for _e, err in bad:
                self._error("xadd", err)
            log.error(
                "redis: %d entries rejected (first on %s: %s); they are dropped",
                len(bad),
                bad[0][0].stream,
                self._scrub(str(bad[0][1])),
            )
            self._drop([e for e, _ in bad], "rejected by Redis")
        if ok and self.on_published is not None:
            self.on_published(ok)

    def _drop(self, entries: Sequence[Outgoing], why: str) -> None:
        with self._lock:
            self.dropped += len(entries)
        log.debug("redis: dropped %d entries: %s", len(entries), why)
        if self.on_dropped is not None:
            self.on_dropped(entries)

    def _error(self, op: str, exc: BaseException) -> None:
        """Count one failed call; only the exception's class name leaves this object."""
        with self._lock:
            self.errors += 1
        if self.on_error is not None:
            self.on_error(op, type(exc).__name__)

    def _failed(self, exc: BaseException, op: str) -> None:
        self._error(op, exc)
        was_connected = self.connected or self._down_since is None
        self.connected = False
        self._failures += 1
        delay = min(self._max, self._initial * 2 ** min(self._failures - 1, 30))
        delay *= 1 + random.uniform(-self._jitter, self._jitter)
        self._next_attempt = time.monotonic() + delay
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        if was_connected:
            self._down_since = time.monotonic()
            log.warning(
                "redis: unavailable (%s); buffering up to %d messages, retrying with backoff",
                self._scrub(f"{type(exc).__name__}: {exc}"),
                self._buffer_max,
            )
        else:
            log.debug("redis: reconnect failed (%s), next try in %.2fs", type(exc).__name__, delay)

    def _succeeded(self) -> None:
        if not self.connected and self._down_since is not None:
            with self._lock:
                self.reconnects += 1
            log.info(
                "redis: reconnected after %.1fs; %d buffered messages to send, %d dropped so far",
                time.monotonic() - self._down_since,
                len(self._buffer),
                self.dropped,
            )
        self.connected = True
        self._failures = 0
        self._down_since = None

    def _scrub(self, text: str) -> str:
        return redact_text(text, *self._secrets)
