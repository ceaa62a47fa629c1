"""A camera as the pipeline sees it: ``Source`` (``run(emit, stop)``), and the
``Emit`` and ``PacketHook`` callbacks it is given.

The kinds of source (:mod:`streamseg.ingest.stream_source`,
:mod:`streamseg.ingest.scene_source`) subclass ``Source``;
:func:`streamseg.ingest.source.open_source` picks one for a URL.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import Any

from streamseg.ingest.health import CameraHealth, HealthState, HealthTracker
from streamseg.ingest.spec import SourceSpec
from streamseg.types import Frame

__all__ = ["Emit", "PacketHook", "Source"]

Emit = Callable[[Frame], None]
# on_packet(camera_id, packet: av.Packet, stream: av.VideoStream), before decoding
PacketHook = Callable[[str, Any, Any], None]


class Source(abc.ABC):
    """A camera: ``run(emit, stop)`` pushes its frames until ``stop`` is set.

    Attributes:
        camera_id: the camera's id.
        url: the URL with secrets redacted (safe to log).
        live: a live source drops its oldest frames when the pipeline is
            behind; a non-live one (a file) is read with backpressure and
            loses nothing.
    """

    def __init__(self, *, camera_id: str, spec: SourceSpec, live: bool, tracker: HealthTracker):
        self.camera_id = camera_id
        self.url = spec.display
        self.spec = spec
        self.live = live
        self._tracker = tracker
        self._seq = 0

    @property
    def health(self) -> CameraHealth:
        """A snapshot of the source's health (thread-safe)."""
        return self._tracker.snapshot()

    def health_history(self) -> list[tuple[float, HealthState]]:
        """Recent state changes as ``(unix time, state)``, oldest first."""
        return self._tracker.history()

    @abc.abstractmethod
    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Emit frames from this thread until ``stop`` is set or the source ends.

        Live sources reconnect inside. Returns when ``stop`` is set (soon
        after), when a file ends (state ``finished``); raises ``SourceError``
        when the source fails for good (state ``failed``). ``emit`` may
        block: that is the backpressure of non-live sources.
        """

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Nothing is held between runs; kept for the stage protocol."""

    def _make_frame(
        self, image: Any, pts: float | None, capture_time: float, camera_time: float | None
    ) -> Frame:
        seq = self._seq
        self._seq += 1
        return Frame(
            camera_id=self.camera_id,
            seq=seq,
            pts=pts,
            capture_time=capture_time,
            image=image,
            camera_time=camera_time,
        )

    def _finish_run(self, stop: threading.Event) -> None:
        final = (HealthState.FAILED, HealthState.FINISHED)
        if stop.is_set() and self._tracker.state not in final:
            self._tracker.set_state(HealthState.STOPPED)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(camera_id={self.camera_id!r}, url={self.url!r})"
