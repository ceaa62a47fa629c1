"""What follows a camera's removal while ``serve`` runs, beyond its source and queue.

``Service.remove_camera`` stops the camera's source (``Pipeline.remove_source``)
and then calls ``forget_camera``: once the frames it had read are through
(published or dropped, a few seconds at most), every part that kept state
for it lets go of it, so nothing reports a camera that is gone:

* the tracking stage: its tracks and rule state (the ``streamseg.track.*``
  gauges stop listing it);
* clips around alerts: its recorder is closed, finishing the clip it was
  writing (``record.clips``);
* the console's live view: its last frame, trails and rate.

The status line, ``/readyz`` and the camera gauges follow the pipeline's
sources and need nothing here; the MQTT sink clears the camera's retained
state topic once the camera is no longer in the health it is given. A
camera added again later under the same id starts afresh.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamseg.runtime.service import Service

__all__ = ["forget_camera"]

log = logging.getLogger("streamseg.runtime")


def forget_camera(service: Service, camera_id: str, *, timeout: float = 5.0) -> None:
    """Let every stage forget ``camera_id`` (after its source was removed).

    Waits up to ``timeout`` seconds for the frames it read to be published
    or dropped, so that none of them brings its state back afterwards.
    """
    pipeline = service.pipeline
    if pipeline is not None:
        if not _through(pipeline.stats, camera_id, timeout):
            log.warning("runtime: frames of removed camera %s still in flight", camera_id)
        _call(pipeline.tracker.forget_camera, camera_id)
    if service.clips is not None:
        _call(service.clips.remove_camera, camera_id)
    if service.live is not None:
        _call(service.live.forget, camera_id)


def _through(stats: Any, camera_id: str, timeout: float) -> bool:
    """Wait until every frame ``camera_id`` read was skipped, published or lost
    (``read = skipped + published + lost`` once none is in the pipeline)."""
    deadline = time.monotonic() + timeout
    while True:
        c = stats.snapshot().get(camera_id)
        if c is None or c.read <= c.skipped + c.published + c.lost:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _call(forget: Callable[[str], object], camera_id: str) -> None:
    try:
        forget(camera_id)
    except Exception:
        log.exception("runtime: forgetting camera %s failed", camera_id)
