"""``synthetic://`` cameras: a ``SyntheticScene`` played as a source.

Paced (the default) it is a live camera at the scene's fps; with
``pace=0`` it renders as fast as the consumer takes frames (not live, with
backpressure), for benchmarks. ``Frame.seq`` is the scene's frame index and
``Frame.pts`` its scene time, so ground truth is ``scene.frame(frame.seq).gt``.
"""

from __future__ import annotations

import threading
import time

from streamseg.ingest.base import Emit, Source
from streamseg.ingest.health import HealthState, HealthTracker
from streamseg.ingest.policy import RateLimiter
from streamseg.ingest.spec import SourceError, SourceSpec
from streamseg.ingest.stream_source import Pacer

__all__ = ["SceneSource"]


class SceneSource(Source):
    """Frames of ``SyntheticScene.from_url(spec.target)``; see the module docstring."""

    def __init__(
        self,
        *,
        camera_id: str,
        spec: SourceSpec,
        live: bool | None,
        max_fps: float | None,
        tracker: HealthTracker,
    ) -> None:
        from streamseg.synthetic.scene import SyntheticScene

        super().__init__(
            camera_id=camera_id,
            spec=spec,
            live=spec.pace if live is None else live,
            tracker=tracker,
        )
        try:
            self.scene = SyntheticScene.from_url(spec.target)
        except ValueError as exc:
            raise SourceError(f"camera {camera_id!r}: {exc}") from None
        self.pace = spec.pace
        self.max_fps = max_fps
        self._limiter = RateLimiter(max_fps)  # kept across runs, like the frame index

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Emit frames from where the last run stopped; ``finished`` at the scene's end."""
        limiter = self._limiter
        pacer = Pacer() if self.pace else None
        end = self.scene.num_frames
        self._tracker.set_state(HealthState.STREAMING)
        try:
            while not stop.is_set():
                index = self._seq
                if end is not None and index >= end:
                    self._tracker.set_state(HealthState.FINISHED)
                    return
                t = self.scene.time(index)
                if not limiter.admit(t):
                    self._seq += 1
                    self._tracker.frame_decoded(emitted=False, when=time.time())
                    continue
                if pacer is not None:
                    pacer.wait(t, stop)
                image = self.scene.frame(index).image
                capture_time = time.time()
                frame = self._make_frame(image, t, capture_time, None)
                self._tracker.frame_decoded(emitted=True, when=capture_time)
                emit(frame)
        finally:
            self._finish_run(stop)
