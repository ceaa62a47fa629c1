"""``BufferedSink``: the outage buffer and reconnect loop every sink shares.

``BufferedSink`` implements the ``Sink`` interface (:mod:`streamseg.publish.sink`)
once: one FIFO buffer per sink and one thread that writes batches of up to
``max_batch`` messages. When the
destination does not answer, messages stay buffered (at most
``buffer_max``; beyond that the oldest are dropped and counted) and a
reconnect is tried with exponential backoff and jitter; once it is back the
buffer drains in its original order. Each sink has its own thread, so a
sink that is away (or slow to refuse a connection) never delays another.
A new kind of sink subclasses it and writes three methods: ``_connect``,
``_write`` and ``_disconnect``.

Delivery is at least once: an outage in the middle of a batch can leave
some messages delivered and still buffered, and those are sent again.
With a tracer (``start(listener, tracer=...)``), each write is traced by
OpenTelemetry's messaging conventions: one PRODUCER span ``send
<destination>`` per destination in the batch (``SendTracer``).

Failed calls reach the listener as ``(op, kind)``: ``op`` is ``connect`` or
the sink's ``write_op`` (``xadd`` for Redis), ``kind`` the exception's class
name, never its message (which may name the server).
"""

from __future__ import annotations

import abc
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from streamseg.backoff import Backoff
from streamseg.publish.delivery import DeliveryOptions
from streamseg.publish.sink import (
    CameraHealth,
    Message,
    SendTracer,
    SinkHealth,
    SinkListener,
)
from streamseg.redact import redact_text

__all__ = ["BufferedSink"]

log = logging.getLogger("streamseg.publish")


class BufferedSink(abc.ABC):
    """A sink with an outage buffer, reconnects and its own writer thread.

    Args:
        name: the sink's name in logs, metrics and ``/readyz``.
        delivery: outage buffer, messages per write, reconnect backoff.
        secrets: strings (passwords) scrubbed from logged error messages.

    ``cpu_seconds`` counts the writer thread's CPU time spent sending.
    ``fence``: when set, ``fence(message)`` is asked right before each write;
    a message it refuses is dropped (a fleet worker's camera whose lease it
    no longer holds safely: ``streamseg.fleet.worker.FleetWorker.admits``).
    """

    type: str = "?"  # the registry key of the subclass ("redis", ...)
    write_op: str = "write"  # ``op`` of a failed write in errors and metrics

    def __init__(
        self,
        *,
        name: str,
        delivery: DeliveryOptions | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self.name = name
        self._buffer: collections.deque[Message] = collections.deque()
        self._inflight = 0
        self.delivery = delivery = delivery or DeliveryOptions()
        self._buffer_max, self._max_batch = delivery.buffer_max, delivery.max_batch
        self._secrets = tuple(secrets)
        self._listener: SinkListener | None = None
        self._tracer: SendTracer | None = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.connected = False
        self.published = self.dropped = self.errors = 0
        self.cpu_seconds = 0.0
        self.reconnects = 0  # successful reconnections
        self.reconnect_attempts = 0  # connection attempts while the destination was away
        self._backoff = Backoff(delivery.reconnect)
        self._next_attempt = 0.0
        self._next_tick = 0.0
        self._down_since: float | None = None
        self.fence: Callable[[Message], bool] | None = None

    # -- what a subclass writes ---------------------------------------------
    @abc.abstractmethod
    def _connect(self) -> None:
        """Open the connection and check it answers; raise when it does not."""

    @abc.abstractmethod
    def _write(self, batch: Sequence[Message]) -> Sequence[BaseException | None]:
        """Deliver ``batch`` in order: per message ``None`` (done) or the error that
        rejected it (dropped). Raise when the destination is away (all kept)."""

    @abc.abstractmethod
    def _disconnect(self) -> None:
        """Close the connection (errors are ignored)."""

    def destination(self, message: Message) -> str:
        """Where ``message`` goes (a stream, a topic): ``messaging.destination.name``."""
        return message.kind

    def accepts(self, kind: str) -> bool:
        """Whether this sink takes messages of ``kind``: every sink takes ``detections``
        and ``alert``; others (``snapshot``) go only to sinks that say so."""
        return kind in ("detections", "alert")

    def attach_health(  # noqa: B027 - a hook, empty unless the sink keeps a state per camera
        self, health: Callable[[], CameraHealth], *, count_untracked: bool
    ) -> None:
        """Where the cameras' health comes from (``Sink.attach_health``): ignored here."""

    # A subclass with periodic work (MQTT's retained state) sets ``tick_interval``
    # (seconds) and writes ``_tick``: the writer thread calls it while connected,
    # between writes; raising there counts as the destination going away.
    tick_interval: float | None = None

    def _tick(self) -> None:  # noqa: B027 - a hook, empty unless a subclass has periodic work
        """Periodic work in the writer thread (see ``tick_interval``)."""

    # -- the Sink interface ---------------------------------------------------
    def start(
        self, listener: SinkListener | None = None, *, tracer: SendTracer | None = None
    ) -> None:
        """Start the writer thread; it connects at once without blocking the caller.
        ``tracer``: traces every write (PRODUCER spans); ``None``: no spans."""
        self._listener = listener
        self._tracer = tracer
        self._thread = threading.Thread(target=self._run, name=f"sink:{self.name}", daemon=True)
        self._thread.start()

    def submit(self, messages: Sequence[Message]) -> None:
        """Buffer ``messages`` (the oldest dropped beyond ``buffer_max``)."""
        with self._cond:
            self._buffer.extend(messages)
            gone = self._trim()
            self._cond.notify_all()
        if gone:
            self._drop(gone, "buffer full")

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for everything buffered to be delivered."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._buffer or self._inflight:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def close(self) -> int:
        """Stop the thread and give up on what is still buffered (dropped, counted)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._cond:
            gone = list(self._buffer)
            self._buffer.clear()
        if gone:
            self._drop(gone, "shutting down while away")
        with contextlib.suppress(Exception):
            self._disconnect()
        return len(gone)

    def health(self) -> SinkHealth:
        with self._cond:
            return SinkHealth(
                name=self.name,
                type=self.type,
                connected=self.connected,
                buffered=len(self._buffer) + self._inflight,
                published=self.published,
                dropped=self.dropped,
                errors=self.errors,
                reconnects=self.reconnects,
            )

    @property
    def buffered(self) -> int:
        with self._cond:
            return len(self._buffer) + self._inflight

    # -- the writer thread ------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._due():
                    self._cond.wait(self._sleep())
                if self._stopping:
                    return
            if not self.connected:
                self._try_connect()
                continue
            if self.tick_interval is not None and time.monotonic() >= self._next_tick:
                self._run_tick()
            with self._cond:
                n = min(self._max_batch, len(self._buffer))
                batch = [self._buffer.popleft() for _ in range(n)]
                self._inflight = n
            if self.fence is not None and batch:
                batch = self._fenced(batch)
            if not batch:
                continue  # woken for the tick only
            t0 = time.thread_time()
            self._send(batch)
            self.cpu_seconds += time.thread_time() - t0

    def _fenced(self, batch: list[Message]) -> list[Message]:
        """``batch`` less what ``fence`` refuses (dropped: "fenced")."""
        fence = self.fence
        assert fence is not None
        admitted = [fence(m) for m in batch]
        keep = [m for m, ok in zip(batch, admitted, strict=True) if ok]
        if len(keep) < len(batch):
            with self._cond:
                self._inflight = len(keep)
                self._cond.notify_all()
            self._drop([m for m, ok in zip(batch, admitted, strict=True) if not ok], "fenced")
        return keep

    def _run_tick(self) -> None:
        self._next_tick = time.monotonic() + (self.tick_interval or 0.0)
        try:
            self._tick()
        except Exception as exc:
            self._failed(exc, self.write_op)

    def _due(self) -> bool:
        """Work to do now: a reconnect attempt, messages to send or a tick (lock held)."""
        if not self.connected:
            return time.monotonic() >= self._next_attempt
        tick = self.tick_interval is not None and time.monotonic() >= self._next_tick
        return bool(self._buffer) or tick

    def _sleep(self) -> float | None:
        if self.connected:
            if self.tick_interval is not None:
                return max(0.0, self._next_tick - time.monotonic())
            return None  # until submit() or close() notifies
        return max(0.0, self._next_attempt - time.monotonic())

    def _try_connect(self) -> None:
        retrying = self._down_since is not None
        try:
            self._connect()
        except Exception as exc:
            self._failed(exc, "connect")
            ok = False
        else:
            self._succeeded()
            ok = True
        if retrying:
            with self._cond:
                self.reconnect_attempts += 1
            if self._listener is not None:
                self._listener.reconnect(self.name, ok)

    def _send(self, batch: list[Message]) -> None:
        try:
            with self._spans(batch):
                results = self._write(batch)
        except Exception as exc:
            with self._cond:  # back at the front, in order; then trim
                self._buffer.extendleft(reversed(batch))
                self._inflight = 0
                gone = self._trim()
            if gone:
                self._drop(gone, "buffer full")
            self._failed(exc, self.write_op)
            return
        ok = [m for m, r in zip(batch, results, strict=True) if r is None]
        bad = [(m, r) for m, r in zip(batch, results, strict=True) if r is not None]
        # Report before the batch stops counting as in flight: once flush()
        # returns, every message has been reported to the listener.
        if bad:
            for _m, err in bad:
                self._error(self.write_op, err)
            log.error(
                "%s: %d messages rejected (first: %s); they are dropped",
                self.name,
                len(bad),
                self._scrub(str(bad[0][1])),
            )
            self._drop([m for m, _ in bad], "rejected")
        if ok and self._listener is not None:
            self._listener.published(self.name, ok)
        with self._cond:
            self._inflight = 0
            self.published += len(ok)
            self._cond.notify_all()

    @contextlib.contextmanager
    def _spans(self, batch: Sequence[Message]) -> Iterator[None]:
        """One PRODUCER span per destination of ``batch``, open around its write."""
        if self._tracer is None:
            yield
            return
        groups: dict[str, list[Message]] = {}
        for m in batch:
            groups.setdefault(self.destination(m), []).append(m)
        with contextlib.ExitStack() as stack:
            for dest, messages in groups.items():
                frames = [m.frame for m in messages if m.frame is not None]
                span = self._tracer.send(
                    system=self.type, destination=dest, sink=self.name, frames=frames,
                    count=len(messages),
                )  # fmt: skip
                stack.enter_context(span)
            yield

    def _trim(self) -> list[Message]:
        """Drop the oldest beyond ``buffer_max`` (lock held); returns them."""
        overflow = len(self._buffer) + self._inflight - self._buffer_max
        return [self._buffer.popleft() for _ in range(min(overflow, len(self._buffer)))]

    def _drop(self, messages: Sequence[Message], why: str) -> None:
        with self._cond:
            self.dropped += len(messages)
        log.debug("%s: dropped %d messages: %s", self.name, len(messages), why)
        if self._listener is not None:
            self._listener.dropped(self.name, messages)

    def _error(self, op: str, exc: BaseException) -> None:
        """Count one failed call; only the exception's class name leaves this object."""
        with self._cond:
            self.errors += 1
        if self._listener is not None:
            self._listener.error(self.name, op, type(exc).__name__)

    def _failed(self, exc: BaseException, op: str) -> None:
        self._error(op, exc)
        was_up = self.connected or self._down_since is None
        delay = self._backoff.next_delay()
        with self._cond:
            self.connected = False
            self._next_attempt = time.monotonic() + delay
        with contextlib.suppress(Exception):
            self._disconnect()
        if was_up:
            self._down_since = time.monotonic()
            log.warning(
                "%s: unavailable (%s); buffering up to %d messages, retrying with backoff",
                self.name,
                self._scrub(f"{type(exc).__name__}: {exc}"),
                self._buffer_max,
            )
        else:
            log.debug(
                "%s: reconnect failed (%s), next try in %.2fs", self.name, type(exc).__name__, delay
            )

    def _succeeded(self) -> None:
        if self._down_since is not None:
            with self._cond:
                self.reconnects += 1
            log.info(
                "%s: reconnected after %.1fs; %d buffered messages to send, %d dropped so far",
                self.name,
                time.monotonic() - self._down_since,
                self.buffered,
                self.dropped,
            )
        with self._cond:
            self.connected = True
            self._cond.notify_all()
        self._backoff.reset()
        self._down_since = None

    def _scrub(self, text: str) -> str:
        return redact_text(text, *self._secrets)
