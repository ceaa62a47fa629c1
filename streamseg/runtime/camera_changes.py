"""A camera changed or removed while ``serve`` runs: what follows, and what fails safe.

A camera's change (``Service.replace_camera``) is ``swap_source``: the new
source is opened before the old one is stopped, so a source that does not
open (a bad parameter, a device that is gone) changes nothing; one that
opens but cannot be started puts the old source back, so the camera is never
left dark. The console's API answers either with a refusal (4xx) and leaves
pipeline.yaml as it was.

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
    from streamseg.ingest.config import CameraConfig
    from streamseg.runtime.pipeline import Pipeline
    from streamseg.runtime.service import Service

__all__ = ["forget_camera", "swap_source"]

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


def swap_source(
    pipeline: Pipeline,
    camera_id: str,
    *,
    opener: Callable[[CameraConfig], Any],
    new: CameraConfig,
    old: CameraConfig,
    forget: Callable[[str], None],
) -> None:
    """Run ``new`` instead of ``old`` (camera ``camera_id``), or leave ``old`` running.

    ``opener`` opens a camera's source (raises ``SourceError``); ``forget``
    lets every stage forget the camera between the two. Raises what failed:
    when ``new`` does not open, nothing was touched; when it opened but could
    not be started, ``old`` was opened and started again first.
    """
    source = opener(new)  # a source that does not open changes nothing
    if camera_id in pipeline.sources:
        pipeline.remove_source(camera_id)
        forget(camera_id)
    try:
        pipeline.add_source(camera_id, source)
    except Exception as exc:
        log.error("runtime: camera %s could not start its new source (%s); back to the old one",
                  camera_id, exc)  # fmt: skip
        _close(source)
        try:
            pipeline.add_source(camera_id, opener(old))
        except Exception:  # still listed: a later change or removal finds it
            log.exception("runtime: camera %s: its old source did not start again", camera_id)
        raise exc from None


def _close(source: Any) -> None:
    try:
        source.close()
    except Exception:
        log.exception("runtime: closing a source that did not start failed")
