"""The cameras ``serve`` runs here, and every change to them while it runs.

:class:`ServedCameras` owns the list of cameras served in this process and
the lock that orders changes to it. Before the pipeline exists a change is
only a change of the list; :meth:`ServedCameras.open_into` opens them all and
hands their sources to the pipeline, and from then on a change reaches the
pipeline too. It is the fleet's ``CameraHost`` (``streamseg.fleet.host``)
and the console's way to change cameras.

A camera's change (:meth:`ServedCameras.replace_camera`) opens the new
source before the old one is stopped, so a source that does not open (a bad
parameter, a device that is gone) changes nothing; one that opens but cannot
be started puts the old source back, so the camera is never left dark. The
console's API answers either with a refusal (4xx) and leaves pipeline.yaml
as it was.

A camera's removal (:meth:`ServedCameras.stop_camera`) stops its source
(``Pipeline.remove_source``) and then forgets it: once the frames it had read
are through (published or dropped, a few seconds at most), every part that
kept state for it lets go of it, so nothing reports a camera that is gone:

* the tracking stage: its tracks and rule state (the ``streamseg.track.*``
  gauges stop listing it);
* the parts given to ``open_into`` as ``forget``: clips around alerts (its
  recorder is closed, finishing the clip it was writing, ``record.clips``)
  and the console's live view (its last frame, trails and rate).

The status line, ``/readyz`` and the camera gauges follow the pipeline's
sources and need nothing here; the MQTT sink clears the camera's retained
state topic once the camera is no longer in the health it is given. A
camera added again later under the same id starts afresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamseg.ingest.config import CameraConfig

if TYPE_CHECKING:
    from streamseg.runtime.pipeline import Pipeline
    from streamseg.runtime.protocols import SourceLike
    from streamseg.runtime.stats import PipelineStats

__all__ = ["Opener", "ServedCameras"]

log = logging.getLogger("streamseg.runtime")

# Opens cameras' sources as the pipeline reads them: ``{camera id: source}``
# (raises ``SourceError``).
Opener = Callable[[Sequence[CameraConfig]], "dict[str, SourceLike]"]


class ServedCameras:
    """The cameras served in this process, and the changes to them.

    Args:
        cameras: the cameras to open when the pipeline is built.
        opener: opens cameras' sources (``Service`` gives its decode device
            and clip packet hook).
        forget_timeout: seconds a removed camera's frames in flight may take
            to be published or dropped before its state is forgotten anyway.
    """

    def __init__(
        self, cameras: Sequence[CameraConfig], *, opener: Opener, forget_timeout: float = 5.0
    ) -> None:
        self._cameras = list(cameras)
        self._open = opener
        self._forget_timeout = forget_timeout
        self._lock = threading.Lock()
        self._pipeline: Pipeline | None = None
        self._forget: tuple[Callable[[str], object], ...] = ()

    @property
    def cameras(self) -> list[CameraConfig]:
        """The cameras served now (a copy), in the order they were added."""
        return list(self._cameras)

    def open_into(
        self,
        build: Callable[[dict[str, SourceLike]], Pipeline],
        *,
        forget: Sequence[Callable[[str], object]] = (),
    ) -> Pipeline:
        """Open every camera, build the pipeline on their sources with ``build``,
        and reach it with every later change; ``forget``: what else forgets a
        removed camera (after the pipeline's tracker)."""
        with self._lock:
            pipeline = build(self._open(self._cameras))
            self._pipeline, self._forget = pipeline, tuple(forget)
        return pipeline

    # -- streamseg.fleet.host.CameraHost ---------------------------------------
    def start_camera(self, camera: CameraConfig) -> None:
        """Start serving one more camera without disturbing the others.

        Raises ``ValueError`` (the id is taken, the pipeline stops) or
        ``SourceError`` (it does not open); then nothing changed.
        """
        with self._lock:
            if any(c.id == camera.id for c in self._cameras):
                raise ValueError(f"camera {camera.id!r} is already served")
            if self._pipeline is not None:
                self._pipeline.add_source(camera.id, self._open([camera])[camera.id])
            self._cameras.append(camera)

    def stop_camera(self, camera_id: str) -> None:
        """Stop serving one camera; its frames already read still reach the sinks,
        then every part that kept state for it forgets it. ``KeyError``: not served."""
        with self._lock:
            if not any(c.id == camera_id for c in self._cameras):
                raise KeyError(camera_id)
            p = self._pipeline
            if p is not None and camera_id in p.sources:
                p.remove_source(camera_id)
                self._forget_camera(p, camera_id)
            self._cameras = [c for c in self._cameras if c.id != camera_id]

    def camera_states(self) -> dict[str, str]:
        """``{camera: state}`` of the cameras served (``connecting`` before the model)."""
        p = self._pipeline
        if p is None:
            return {c.id: "connecting" for c in self._cameras}
        return {cid: state for cid, (state, _r, _d) in p.camera_states().items()}

    def replace_camera(self, camera: CameraConfig) -> None:
        """Serve ``camera`` instead of the camera of its id, the others undisturbed; a
        change that fails leaves the old one running. Raises ``KeyError`` (no such
        camera), ``SourceError``, ``ValueError``."""
        with self._lock:
            ids = [c.id for c in self._cameras]
            if camera.id not in ids:
                raise KeyError(camera.id)
            at = ids.index(camera.id)
            if self._pipeline is not None:
                self._swap(self._pipeline, new=camera, old=self._cameras[at])
            self._cameras[at] = camera

    # -- inside ------------------------------------------------------------------
    def _swap(self, pipeline: Pipeline, *, new: CameraConfig, old: CameraConfig) -> None:
        """Run ``new`` instead of ``old``, or leave ``old`` running.

        Raises what failed: when ``new`` does not open, nothing was touched;
        when it opened but could not be started, ``old`` was opened and
        started again first.
        """
        cid = new.id
        source = self._open([new])[cid]  # a source that does not open changes nothing
        if cid in pipeline.sources:
            pipeline.remove_source(cid)
            self._forget_camera(pipeline, cid)
        try:
            pipeline.add_source(cid, source)
        except Exception as exc:
            log.error("runtime: camera %s could not start its new source (%s); back to the old one",
                      cid, exc)  # fmt: skip
            _close(source)
            try:
                pipeline.add_source(cid, self._open([old])[cid])
            except Exception:  # still listed: a later change or removal finds it
                log.exception("runtime: camera %s: its old source did not start again", cid)
            raise exc from None

    def _forget_camera(self, pipeline: Pipeline, camera_id: str) -> None:
        """Let every part forget ``camera_id`` (after its source was removed), once
        the frames it read are published or dropped, so none brings it back."""
        if not _through(pipeline.stats, camera_id, self._forget_timeout):
            log.warning("runtime: frames of removed camera %s still in flight", camera_id)
        for forget in (pipeline.tracker.forget_camera, *self._forget):
            try:
                forget(camera_id)
            except Exception:
                log.exception("runtime: forgetting camera %s failed", camera_id)


def _through(stats: PipelineStats, camera_id: str, timeout: float) -> bool:
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


def _close(source: Any) -> None:
    try:
        source.close()
    except Exception:
        log.exception("runtime: closing a source that did not start failed")
