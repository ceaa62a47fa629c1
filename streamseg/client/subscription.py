"""``Subscription``: one reader of some streams, with or without a consumer group.

Without a group it follows the streams with ``XREAD`` from the position it
was given (``now``: the newest entry when it starts; ``begin``: the oldest
kept; or an entry id), keeping the id of the last entry it read in each
stream, so it picks up after an outage exactly where it stopped.

With a group it reads with ``XREADGROUP``: first this consumer's pending
entries (read before but never acknowledged, e.g. by a consumer that died),
then new ones (``>``). After an outage it reads the pending entries again
(what Redis still holds for it), skipping the ones it already handed out,
so a message is neither lost nor handed out twice once acknowledged.
Acknowledgement is automatic when the next message is asked for (the
previous one counts as processed) or explicit (``ack()``); acknowledgements
that fail during an outage are sent once Redis is back.

Each message handed out gets an OpenTelemetry CONSUMER span ``process
<stream>`` (messaging conventions), current while the caller processes it
and ended when the next message is asked for; it links to the trace named
by the message's ``traceparent`` field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from streamseg import backoff as retry
from streamseg.client.events import ClientError, Entry
from streamseg.client.order import ArrivalOrder
from streamseg.closing import Closing

__all__ = ["Backoff", "Subscription"]

T = TypeVar("T")
log = logging.getLogger("streamseg.client")
_PROPAGATOR = TraceContextTextMapPropagator()
_START_IDS = {"now": "$", "begin": "0"}


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Reconnect policy: waits from ``initial`` doubling to ``max`` seconds (+-``jitter``);
    give up (``ClientError``) after ``max_outage`` seconds without Redis (``None``: never)."""

    initial: float = 0.2
    max: float = 5.0
    jitter: float = 0.2
    max_outage: float | None = None

    def policy(self) -> retry.ReconnectPolicy:
        """The waits as ``streamseg.backoff`` gives them (the sinks' and cameras' policy)."""
        return retry.ReconnectPolicy(
            initial=min(self.initial, self.max), max_delay=self.max, jitter=min(self.jitter, 0.99)
        )


def start_id(start: str) -> str:
    """``now`` -> ``$``, ``begin`` -> ``0``, an entry id (``1718000000000-0``) as it is."""
    if start in _START_IDS:
        return _START_IDS[start]
    ms, _, n = start.partition("-")
    if ms.isdigit() and (n == "" or n.isdigit()):
        return start
    raise ValueError(f"start must be 'now', 'begin' or a stream entry id, got {start!r}")


class Subscription(Closing, Generic[T]):
    """An iterator over the messages of some streams (see the module docstring).

    Built by ``Client``; ``convert(entry, message)`` makes what it yields
    (``message`` is the entry's JSON object, ``None`` when it has none).
    One thread iterates a subscription; ``delivered`` counts what it handed
    out, ``reconnects`` the outages it came through.
    """

    def __init__(
        self,
        *,
        redis: Any,
        streams: Sequence[str],
        pattern: str | None,
        start: str,
        group: str | None,
        consumer: str,
        auto_ack: bool,
        limit: int | None,
        idle_timeout: float | None,
        block: float,
        batch: int,
        convert: Callable[[Entry, dict[str, Any] | None], T],
        tracer: Tracer,
        backoff: Backoff,
    ) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self._redis, self._convert, self._tracer, self._backoff = redis, convert, tracer, backoff
        self._fixed, self._pattern, self._start = list(streams), pattern, start_id(start)
        self.group, self.consumer, self.auto_ack = group, consumer, auto_ack
        self._limit, self._idle, self._block, self._batch = limit, idle_timeout, block, batch
        self._streams: list[str] = []
        self._last: dict[str, str] = {}  # no group: last id read per stream
        self._recheck: dict[str, str] = {}  # group: stream -> where to go on reading its pending
        self._held: set[tuple[str, str]] = set()  # group: handed out or buffered, not acked
        self._acks: dict[str, list[str]] = {}
        self._order = ArrivalOrder()  # read, not yet handed out; merged by arrival
        self._current: Entry | None = None
        self._span: Any = None
        self._token: Any = None
        self._started = self._closed = False
        self._last_scan = float("-inf")
        self._active: float | None = None  # when the last message came (or the first read)
        self._outage_since: float | None = None
        self._retries = retry.Backoff(backoff.policy())
        self.delivered = 0
        self.reconnects = 0

    # -- iteration ----------------------------------------------------------------
    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        self._finish_current()
        if self._closed or (self._limit is not None and self.delivered >= self._limit):
            self.close()
            raise StopIteration
        got = self._next_entry()
        if got is None:
            self.close()
            raise StopIteration
        entry, message = got
        self.delivered += 1
        self._active = time.monotonic()
        self._current = entry
        self._open_span(entry, message)
        try:
            return self._convert(entry, message)
        except Exception as exc:
            self._span.record_exception(exc)
            self._span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise

    def ack(self, item: Any) -> None:
        """Acknowledge ``item`` (anything with ``stream`` and ``id``: an event or an ``Entry``)."""
        if self.group is None:
            return
        self._acks.setdefault(item.stream, []).append(item.id)
        import redis

        with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
            self._flush_acks()  # else sent once Redis is back

    def close(self) -> None:
        """Stop: end the open span and send queued acknowledgements (the message being
        processed is not acknowledged: with a group it is read again next time)."""
        import redis

        if self._span is not None:
            self._end_span()
        self._current = None
        if self._closed:
            return
        self._closed = True
        for attempt in range(3):  # a connection Redis dropped fails once, then reconnects
            try:
                self._flush_acks()
                return
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                error = exc
                time.sleep(self._backoff.initial * 2**attempt)
        log.warning(
            "%d acknowledgements not sent (%s): those messages will be read again",
            sum(map(len, self._acks.values())),
            type(error).__name__,
        )

    # -- reading --------------------------------------------------------------------
    def _next_entry(self) -> tuple[Entry, dict[str, Any] | None] | None:
        import redis

        while True:
            got = self._order.pop()
            if got is not None:
                return got
            idle_left = self._idle_left()
            if idle_left is not None and idle_left <= 0:
                return None
            try:
                self._flush_acks()
                self._refresh_streams()
                if not self._streams:
                    time.sleep(min(0.2, idle_left or 0.2))
                    continue
                self._read(min(self._block, idle_left or self._block))
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                self._outage(exc)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._regroup()  # Redis lost the group (restarted without its data)
            else:
                self._recovered()

    def _idle_left(self) -> float | None:
        if self._active is None:
            self._active = time.monotonic()
        if self._idle is None:
            return None
        return self._idle - (time.monotonic() - self._active)

    def _room(self) -> int:
        if self._limit is None:
            return self._batch
        return max(1, min(self._batch, self._limit - self.delivered))

    def _refresh_streams(self) -> None:
        names = list(self._fixed)
        now = time.monotonic()
        if self._pattern is not None and now - self._last_scan > 1.0:
            found = self._redis.scan_iter(match=self._pattern, count=500)
            names += sorted(_text(k) for k in found)
            self._last_scan = now
        for name in names:
            if name not in self._streams:
                # A stream that shows up after the start is read from its beginning.
                self._add_stream(name, self._start if not self._started else "0")
        self._started = True

    def _add_stream(self, name: str, start: str) -> None:
        if self.group is not None:
            self._ensure_group(name, start)
            self._recheck[name] = "0"
        elif start == "$":
            # Resolve "$" once, so no message falls between two reads.
            last = self._redis.xrevrange(name, count=1)
            self._last[name] = _text(last[0][0]) if last else "0-0"
        else:
            self._last[name] = start
        self._streams.append(name)

    def _ensure_group(self, name: str, start: str) -> None:
        import redis

        try:
            self._redis.xgroup_create(name, self.group, id=start, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _regroup(self) -> None:
        log.warning("consumer group %r is gone from Redis; created again", self.group)
        for name in self._streams:
            self._ensure_group(name, "0")
            self._recheck[name] = "0"

    def _read(self, block: float) -> None:
        block_ms = max(1, int(block * 1000))  # BLOCK 0 would wait forever
        count = self._room()
        if self.group is None:
            resp = self._redis.xread(self._last, count=count, block=block_ms)
            read = {}
            for stream, entries in resp or []:
                name = _text(stream)
                read[name] = [_entry(name, eid, fields) for eid, fields in entries]
                if entries:
                    self._last[name] = _text(entries[-1][0])
            self._take(read, count)
            return
        if self._recheck and self._read_pending():
            return
        streams = {name: ">" for name in self._streams}
        resp = self._redis.xreadgroup(
            self.group, self.consumer, streams, count=count, block=block_ms
        )
        read = {}
        for stream, entries in resp or []:
            name = _text(stream)
            read[name] = [_entry(name, eid, fields) for eid, fields in entries]
            self._held.update((name, e.id) for e in read[name])
        self._take(read, count)

    def _take(self, read: dict[str, list[Entry]], count: int) -> None:
        """One read's entries into the arrival order; a stream that came back with fewer
        than ``count`` (or nothing) holds nothing earlier."""
        for name in self._streams:
            entries = read.get(name, [])
            self._order.add(name, entries, full=len(entries) >= count)

    def _read_pending(self) -> bool:
        """Read this consumer's pending entries, of every stream that may have some
        (so they merge in arrival order); ``True`` if any had some."""
        count, found = self._room(), False
        for name, after in list(self._recheck.items()):
            resp = self._redis.xreadgroup(self.group, self.consumer, {name: after}, count=count)
            entries = resp[0][1] if resp else []
            if not entries:
                del self._recheck[name]
                continue
            found = True
            self._recheck[name] = _text(entries[-1][0])
            held = []
            for eid, fields in entries:
                if (name, _text(eid)) in self._held:
                    continue  # handed out already, not yet acknowledged
                if not fields:  # trimmed from the stream while pending: nothing to read
                    self._acks.setdefault(name, []).append(_text(eid))
                    continue
                held.append(_entry(name, eid, fields))
                self._held.add((name, _text(eid)))
            self._order.add(name, held, full=len(entries) >= count)
        return found

    def _flush_acks(self) -> None:
        while self._acks:
            stream, ids = next(iter(self._acks.items()))
            self._redis.xack(stream, self.group, *ids)
            del self._acks[stream]
            self._held.difference_update((stream, i) for i in ids)

    def _finish_current(self) -> None:
        if self._span is not None:
            self._end_span()
        if self._current is not None and self.auto_ack and self.group is not None:
            self._acks.setdefault(self._current.stream, []).append(self._current.id)
        self._current = None

    # -- outages --------------------------------------------------------------------
    def _outage(self, exc: BaseException) -> None:
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
            log.warning("Redis unreachable (%s); reconnecting with backoff", type(exc).__name__)
        b = self._backoff
        if b.max_outage is not None and now - self._outage_since > b.max_outage:
            raise ClientError(
                f"Redis unreachable for {now - self._outage_since:.0f}s (last error: "
                f"{type(exc).__name__}); giving up (max_outage={b.max_outage}s)"
            ) from None
        if self.group is not None:  # after it: what Redis holds for us, first
            self._recheck = dict.fromkeys(self._streams, "0")
        time.sleep(self._retries.next_delay())

    def _recovered(self) -> None:
        if self._outage_since is not None:
            log.info("Redis is back after %.1fs", time.monotonic() - self._outage_since)
            self.reconnects += 1
            self._outage_since = None
        self._retries.reset()

    # -- tracing ----------------------------------------------------------------------
    def _open_span(self, entry: Entry, message: dict[str, Any] | None) -> None:
        links = []
        parent = message.get("traceparent") if message else None
        if isinstance(parent, str):
            ctx = trace.get_current_span(_PROPAGATOR.extract({"traceparent": parent}))
            span_ctx = ctx.get_span_context()
            if span_ctx.is_valid:
                links.append(Link(span_ctx))
        attrs = {
            "messaging.system": "redis",
            "messaging.destination.name": entry.stream,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": entry.id,
        }
        if self.group is not None:
            attrs["messaging.consumer.group.name"] = self.group
        self._span = self._tracer.start_span(
            f"process {entry.stream}", kind=SpanKind.CONSUMER, links=links, attributes=attrs
        )
        self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def _end_span(self) -> None:
        otel_context.detach(self._token)
        self._span.end()
        self._span = self._token = None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _entry(stream: str, eid: bytes | str, fields: dict[bytes, bytes] | None) -> Entry:
    return Entry(stream, _text(eid), (fields or {}).get(b"data"))
