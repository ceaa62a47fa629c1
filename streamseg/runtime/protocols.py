"""What the runtime needs from the other stages (see docs/architecture.md).

Structural types only: the runtime never imports a stage's implementation
here, so it can be built and tested on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from streamseg.types import Event, Frame, FrameBatch, FrameResult, Instances

__all__ = ["SegmenterLike", "SourceLike", "TrackingStageLike"]


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


class TrackingStageLike(Protocol):
    """``streamseg.track.stage.build_tracking_stage(...)``'s result."""

    def process(self, result: FrameResult) -> tuple[FrameResult, list[Event]]: ...

    def close(self) -> None: ...
