"""``Client``: read what a streamseg service publishes to Redis, as typed events.

Example::

    from streamseg.client import Alert, Client

    with Client("redis://127.0.0.1:6379/0") as client:
        for alert in client.alerts(start="now"):
            print(alert.kind, alert.camera, alert.track_id)

        for item in client.messages(group="dashboard"):   # both kinds, as they arrived
            if isinstance(item, Alert):
                print("alert", item.kind, item.rule)
            else:
                print("frame", item.camera, item.seq, len(item.instances))

        for frame in client.detections(cameras=["gate"], group="counter", consumer="c1"):
            people = [i for i in frame.instances if i.label_name == "person"]
            masks = [i.mask() for i in people]        # (H, W) bool numpy arrays, decoded now
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from opentelemetry import trace
from opentelemetry.trace import TracerProvider

from streamseg.client.events import Alert, Entry, FrameDetections
from streamseg.client.subscription import Backoff, Subscription, start_id
from streamseg.client.validate import SchemaValidator
from streamseg.closing import Closing
from streamseg.publish.connect import redis_client
from streamseg.publish.redis_config import RedisConfig
from streamseg.streams import alerts_stream, detections_pattern, detections_stream

__all__ = ["Client"]

T = TypeVar("T")


class Client(Closing):
    """A reader of one service's streams (``<prefix>:detections:<camera>``, ``<prefix>:alerts``):
    ``detections()``, ``alerts()``, both together in arrival order (``messages()``),
    or raw ``entries()``.

    Args:
        redis: a ``redis://``/``rediss://`` url, or a pipeline's ``redis:``
            section (``RedisConfig``: password, TLS files and stream prefix
            as the service uses them); default ``redis://127.0.0.1:6379/0``.
        prefix: the stream prefix (default: the section's ``stream_prefix``).
        validate: debug mode: check every message against its JSON Schema
            first (``SchemaError`` names the field); needs
            ``pip install 'streamseg[client-debug]'``.
        block: seconds one blocking read waits before looking again (new
            streams, idle timeouts).
        batch: entries fetched per read.
        backoff: reconnect policy after Redis went away (``Backoff``).
        tracer_provider: where the consume spans go (default: the global one).
    """

    def __init__(
        self,
        redis: str | RedisConfig | None = None,
        *,
        prefix: str | None = None,
        validate: bool = False,
        block: float = 1.0,
        batch: int = 100,
        backoff: Backoff | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        if isinstance(redis, RedisConfig):
            cfg = redis
        else:
            cfg = RedisConfig() if redis is None else RedisConfig().with_url(redis)
        if block <= 0 or batch < 1:
            raise ValueError("block must be > 0 seconds and batch >= 1")
        self.config = cfg
        self.prefix = prefix or cfg.stream_prefix
        self.redis = redis_client(cfg, socket_timeout=max(cfg.socket_timeout, block + 5.0))
        self._validator = SchemaValidator() if validate else None
        self._block, self._batch = block, batch
        self._backoff = backoff or Backoff()
        self._tracer = trace.get_tracer("streamseg.client", tracer_provider=tracer_provider)

    def detections_stream(self, camera: str) -> str:
        return detections_stream(self.prefix, camera)

    @property
    def alerts_stream(self) -> str:
        return alerts_stream(self.prefix)

    def detections(
        self,
        cameras: Sequence[str] | None = None,
        *,
        start: str = "now",
        group: str | None = None,
        consumer: str | None = None,
        auto_ack: bool = True,
        limit: int | None = None,
        idle_timeout: float | None = None,
    ) -> Subscription[FrameDetections]:
        """Each frame's detections of ``cameras`` (``None``: every camera, including
        cameras that start publishing later).

        Args:
            start: ``"now"`` (what is published from now on), ``"begin"``
                (everything the streams still hold) or an entry id. With a
                group it only places a new group; an existing one goes on
                from where it is.
            group / consumer: read as ``consumer`` (default host-pid) of the
                consumer group ``group`` (created when missing).
            auto_ack: with a group, acknowledge a message when the next one
                is asked for; ``False``: call ``subscription.ack(event)``.
            limit: stop after this many messages.
            idle_timeout: stop after this many seconds without one.
        """
        streams = [self.detections_stream(c) for c in cameras or ()]
        pattern = detections_pattern(self.prefix) if cameras is None else None
        convert = self._typed(FrameDetections, "detections")
        return self._subscribe(
            streams,
            pattern,
            convert,
            _Options(start, group, consumer, auto_ack, limit, idle_timeout),
        )

    def alerts(
        self,
        *,
        start: str = "now",
        group: str | None = None,
        consumer: str | None = None,
        auto_ack: bool = True,
        limit: int | None = None,
        idle_timeout: float | None = None,
    ) -> Subscription[Alert]:
        """Every alert of every camera (the arguments are those of ``detections``)."""
        return self._subscribe(
            [self.alerts_stream],
            None,
            self._typed(Alert, "alert"),
            _Options(start, group, consumer, auto_ack, limit, idle_timeout),
        )

    def messages(
        self,
        cameras: Sequence[str] | None = None,
        *,
        alerts: bool = True,
        start: str = "now",
        group: str | None = None,
        consumer: str | None = None,
        auto_ack: bool = True,
        limit: int | None = None,
        idle_timeout: float | None = None,
    ) -> Subscription[FrameDetections | Alert]:
        """Detections of ``cameras`` (``None``: every camera, also ones that start later)
        and every alert (``alerts``), in one subscription, in the order they arrived.

        Each item is a ``FrameDetections`` or an ``Alert`` (``isinstance`` or
        ``match`` tells them apart); a frame's detections come before the
        alerts it caused. With ``group``, one consumer group spans both
        streams: ``ack`` takes either kind. The other arguments are those of
        ``detections``.
        """
        streams, pattern = self._sources(cameras, alerts)
        frames = self._typed(FrameDetections, "detections")
        events = self._typed(Alert, "alert")

        def convert(entry: Entry, message: dict[str, Any] | None) -> FrameDetections | Alert:
            typed = events if entry.stream == self.alerts_stream else frames
            return typed(entry, message)

        return self._subscribe(
            streams,
            pattern,
            convert,
            _Options(start, group, consumer, auto_ack, limit, idle_timeout),
        )

    def entries(
        self,
        cameras: Sequence[str] | None = None,
        *,
        alerts: bool = True,
        start: str = "now",
        group: str | None = None,
        consumer: str | None = None,
        auto_ack: bool = True,
        limit: int | None = None,
        idle_timeout: float | None = None,
    ) -> Subscription[Entry]:
        """The raw entries (``Entry``: stream, id, JSON bytes) of what ``messages`` reads,
        chosen as it chooses (``cameras``: ``None`` for every camera; ``alerts``);
        the other arguments are those of ``detections``."""
        streams, pattern = self._sources(cameras, alerts)

        def raw(entry: Entry, message: dict[str, Any] | None) -> Entry:
            if self._validator is not None:
                self._validator.check(entry.message(), expect=None, where=_where(entry))
            return entry

        return self._subscribe(
            streams, pattern, raw, _Options(start, group, consumer, auto_ack, limit, idle_timeout)
        )

    def _sources(self, cameras: Sequence[str] | None, alerts: bool) -> tuple[list[str], str | None]:
        """The streams ``messages`` and ``entries`` read: the detections of ``cameras``
        (``None``: a pattern that also finds cameras that start later) and the alerts
        stream (``alerts``); ``ValueError`` when that is nothing."""
        streams = [self.detections_stream(c) for c in cameras or ()]
        if alerts:
            streams.append(self.alerts_stream)
        pattern = detections_pattern(self.prefix) if cameras is None else None
        if not streams and pattern is None:
            raise ValueError("nothing to read: give cameras, or alerts=True")
        return streams, pattern

    def ping(self) -> None:
        """Check that Redis answers (``redis.RedisError`` when it does not)."""
        self.redis.ping()

    def close(self) -> None:
        self.redis.close()

    def _typed(self, cls: Any, kind: str) -> Callable[[Entry, dict[str, Any] | None], Any]:
        def convert(entry: Entry, message: dict[str, Any] | None) -> Any:
            if message is None:
                message = entry.message()  # raises MessageError saying why
            if self._validator is not None:
                self._validator.check(message, expect=kind, where=_where(entry))
            return cls.from_message(message, stream=entry.stream, id=entry.id)

        return convert

    def _subscribe(
        self,
        streams: list[str],
        pattern: str | None,
        convert: Callable[[Entry, dict[str, Any] | None], T],
        opts: _Options,
    ) -> Subscription[T]:
        start_id(opts.start)  # a bad start is an error now, not at the first read
        if opts.consumer is not None and opts.group is None:
            raise ValueError("consumer needs group")
        return Subscription(
            redis=self.redis,
            streams=streams,
            pattern=pattern,
            start=opts.start,
            group=opts.group,
            consumer=opts.consumer or f"{os.uname().nodename}-{os.getpid()}",
            auto_ack=opts.auto_ack,
            limit=opts.limit,
            idle_timeout=opts.idle_timeout,
            block=self._block,
            batch=self._batch,
            convert=convert,
            tracer=self._tracer,
            backoff=self._backoff,
        )


class _Options(NamedTuple):
    start: str
    group: str | None
    consumer: str | None
    auto_ack: bool
    limit: int | None
    idle_timeout: float | None


def _where(entry: Entry) -> str:
    return f"{entry.stream} {entry.id}"
