"""What the runtime needs from the other stages (see docs/architecture.md).

Structural types only: the runtime never imports a stage's implementation
here, so it can be built and tested on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

from torch import Tensor

from streamseg.types import Event, Frame, FrameBatch, FrameResult, Instances

__all__ = ["FrameTap", "SegmenterLike", "SourceLike", "SubmittingSegmenter", "TrackingStageLike"]


class SourceLike(Protocol):
    """``streamseg.ingest.open_source(...)``'s result."""

    live: bool

    @property
    def health(
        self,
    ) -> Any: ...  # CameraHealth(state, since, reconnects, stalls, frames, last_frame_time, ...)

    def run(self, emit: Callable[[Frame], None], stop: threading.Event) -> None: ...


class SegmenterLike(Protocol):
    """``streamseg.segment.Segmenter``."""

    @property
    def class_names(self) -> tuple[str, ...]: ...

    def segment(self, batch: FrameBatch) -> list[Instances]: ...

    def warm_up(self) -> float: ...

    def close(self) -> None: ...


class SubmittingSegmenter(SegmenterLike, Protocol):
    """A segmenter that takes the next batch before the last one is done
    (``streamseg.runtime.model_process.ModelProcess``): ``submit`` returns at
    once with a future of the batch's instances; results come in order."""

    def submit(self, batch: FrameBatch) -> Future[list[Instances]]: ...


class TrackingStageLike(Protocol):
    """``streamseg.track.stage.build_tracking_stage(...)``'s result."""

    def process(self, result: FrameResult) -> tuple[FrameResult, list[Event]]: ...

    def close(self) -> None: ...


class FrameTap(Protocol):
    """``streamseg.console.live.LiveView``: tracked frames, with pixels, of watched cameras.

    ``wants`` is asked for every frame after segmentation (pixels are kept
    only when it says yes); ``offer`` gets them after tracking, in the track
    thread, with the camera's rule counts (zone occupancy, line in/out) and
    the frame's alert events, and returns those events as they are to be
    published (with ``snapshot`` set where one will be written).
    """

    def wants(self, camera_id: str) -> bool: ...

    def offer(
        self,
        image: Tensor,
        result: FrameResult,
        counts: Mapping[str, Any],
        events: Sequence[Event],
    ) -> Sequence[Event]: ...
