"""The sink interface: what the runtime calls on every sink, and the messages it hands them.

A sink delivers the pipeline's messages somewhere (Redis Streams, an MQTT
broker). The runtime holds a list of them and hands each message
to every one::

    sink.start(listener)        # connect in the background; report to listener
    sink.submit(messages)       # never blocks on the network
    sink.flush(timeout)         # shutdown: wait until everything was delivered
    sink.close()                # give up on what is left (counted as dropped)
    sink.health()               # connected, buffered, published, dropped, ...

``BufferedSink`` (:mod:`streamseg.publish.buffered`) implements it once; a
new kind of sink subclasses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from streamseg.types import Frame

__all__ = ["CameraHealth", "Message", "SendTracer", "Sink", "SinkHealth", "SinkListener"]

# ``{camera: {state, since, reconnects, stalls, last_error, ...}}`` of the cameras
# served now, as ``/readyz`` shows them.
CameraHealth = Mapping[str, Mapping[str, Any]]


@dataclasses.dataclass(frozen=True)
class Message:
    """One message, encoded once and given to every sink.

    ``kind`` is ``detections`` (one per frame; ``frame`` is that frame,
    pixels dropped, for latency and tracing) or ``alert``; ``camera`` the
    camera it is about; ``data`` the JSON (docs/events.md). Each sink picks
    its own destination from ``kind`` and ``camera`` (a Redis stream, an
    MQTT topic). ``published_time`` starts the delivery delay (publish to
    the sink's acknowledgement), as capture to it is the processing latency.
    """

    kind: str
    camera: str
    data: bytes
    frame: Frame | None = None
    published_time: float = 0.0  # unix seconds it was handed to the sinks (0: unknown)


@dataclasses.dataclass(frozen=True)
class SinkHealth:
    """A sink's state for ``/readyz``, the status line and metrics."""

    name: str
    type: str
    connected: bool
    buffered: int
    published: int
    dropped: int
    errors: int
    reconnects: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class SinkListener(Protocol):
    """What a sink tells the runtime (from the sink's own thread)."""

    def published(self, sink: str, messages: Sequence[Message]) -> None: ...

    def dropped(self, sink: str, messages: Sequence[Message]) -> None: ...

    def error(self, sink: str, op: str, kind: str) -> None: ...

    def reconnect(self, sink: str, ok: bool) -> None: ...


class SendTracer(Protocol):
    """Opens the PRODUCER span of one write to one destination (see telemetry.tracing)."""

    def send(
        self, *, system: str, destination: str, sink: str, frames: Sequence[Frame], count: int
    ) -> contextlib.AbstractContextManager[Any]: ...


class Sink(Protocol):
    """Where messages go; ``name`` is unique in a pipeline (``redis``, ``mqtt``, ...)."""

    name: str

    def start(
        self, listener: SinkListener | None = None, *, tracer: SendTracer | None = None
    ) -> None: ...

    def submit(self, messages: Sequence[Message]) -> None: ...

    def flush(self, timeout: float) -> bool: ...

    def close(self) -> int: ...

    def health(self) -> SinkHealth: ...

    def accepts(self, kind: str) -> bool:
        """Whether the sink takes messages of ``kind`` (``detections`` and ``alert``
        always; ``snapshot`` only where the sink says so)."""
        ...

    def attach_health(self, health: Callable[[], CameraHealth], *, count_untracked: bool) -> None:
        """Where the cameras' health comes from, for a sink that publishes a state per
        camera; ``count_untracked``: tracking is off. Others ignore it."""
        ...
