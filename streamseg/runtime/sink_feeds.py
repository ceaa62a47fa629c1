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
from typing import TYPE_CHECKING, Any

from streamseg.publish.encode import alert_message, dumps
from streamseg.publish.sink import Message
from streamseg.types import Event

if TYPE_CHECKING:
    from streamseg.runtime.pipeline import Pipeline
    from streamseg.runtime.service import Service

__all__ = ["feed_sinks"]


def feed_sinks(service: Service, pipeline: Pipeline) -> None:
    """Give the sinks of ``pipeline`` the camera health and alert snapshots they take."""

    def health() -> dict[str, dict[str, Any]]:
        return {cid: details for cid, (_s, _r, details) in pipeline.camera_states().items()}

    for sink in pipeline.sinks:
        sink.attach_health(health, count_untracked=not service.config.tracking.enabled)
    if service.clips is not None:

        def on_alert(event: Event) -> None:
            now = time.time()
            body = dumps(alert_message(event))
            for sink in pipeline.sinks:
                sink.submit([Message("alert", event.camera_id, body, published_time=now)])

        service.clips.on_alert = on_alert
    takers = [s for s in pipeline.sinks if s.accepts("snapshot")]
    if takers and service.events is not None:

        def on_snapshot(camera_id: str, jpeg: bytes) -> None:
            for sink in takers:
                sink.submit([Message("snapshot", camera_id, jpeg)])

        service.events.on_snapshot = on_snapshot
