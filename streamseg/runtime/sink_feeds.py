"""What some sinks take besides the pipeline's messages, connected once the pipeline exists.

* Camera health, for sinks that keep a state per camera (MQTT's retained
  ``<prefix>/<camera>/state``): ``Sink.attach_health(health)``, where
  ``health()`` is ``{camera: details}`` of the cameras served now, as
  ``/readyz`` shows them (a camera removed while running drops out of it).
* Recording's own alerts (``record.retention``: the one ``disk_full`` event
  of a stop for a full disk), published like the rules' alerts.
* Alert snapshots, for sinks whose ``Sink.accepts("snapshot")`` is true (MQTT's
  ``<prefix>/<camera>/snapshot``): each JPEG the console's event log writes
  is handed to them as it is written (from the log's writer thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamseg.publish.encode import alert_message, dumps
from streamseg.publish.sink import Message, Sink
from streamseg.types import Event

if TYPE_CHECKING:
    from streamseg.console.events import EventLog
    from streamseg.record.clips import ClipHook

__all__ = ["SinkFeeds"]


class SinkFeeds:
    """The sinks' feeds besides the pipeline's messages: camera health, recording's
    own alerts, alert snapshots.

    Args:
        sinks: the pipeline's sinks; each is given ``health`` at once.
        health: ``{camera: details}`` of the cameras served now.
        count_untracked: what ``Sink.attach_health`` counts without tracking.
    """

    def __init__(
        self,
        sinks: Sequence[Sink],
        *,
        health: Callable[[], dict[str, dict[str, Any]]],
        count_untracked: bool,
    ) -> None:
        self._sinks = tuple(sinks)
        self._takers = tuple(s for s in self._sinks if s.accepts("snapshot"))
        for sink in self._sinks:
            sink.attach_health(health, count_untracked=count_untracked)

    def connect(self, *, clips: ClipHook | None, events: EventLog | None) -> None:
        """Feed recording's alerts (``clips.on_alert``) and, when a sink takes them,
        the event log's snapshots (``events.on_snapshot``) to the sinks."""
        if clips is not None:
            clips.on_alert = self.alert
        if events is not None and self._takers:
            events.on_snapshot = self.snapshot

    def alert(self, event: Event) -> None:
        """Publish one alert of recording's own (``disk_full``) to every sink."""
        now = time.time()
        body = dumps(alert_message(event))
        for sink in self._sinks:
            sink.submit([Message("alert", event.camera_id, body, published_time=now)])

    def snapshot(self, camera_id: str, jpeg: bytes) -> None:
        """Hand one alert snapshot (JPEG bytes) to the sinks that take snapshots."""
        for sink in self._takers:
            sink.submit([Message("snapshot", camera_id, jpeg)])
