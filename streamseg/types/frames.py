"""Frames as sources read them, and the batches the model takes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch
from torch import Tensor


@dataclasses.dataclass(frozen=True)
class Frame:
    """One decoded video frame of one camera.

    Attributes:
        camera_id: the camera's id from ``pipeline.yaml``.
        seq: per-camera sequence number, counting every frame the source
            produced (dropped ones included), starting at 0.
        pts: presentation timestamp in seconds (stream clock), or ``None``.
        capture_time: wall-clock time (unix seconds) when the frame was read.
        image: ``uint8`` tensor ``(H, W, 3)``, RGB, on any device.
        camera_time: the camera's wall clock for this frame (unix seconds)
            when known from RTCP sender reports, else ``None``.
        trace: opaque telemetry context carried from ingest to publish
            (e.g. a W3C ``traceparent`` mapping); empty when tracing is off.
    """

    camera_id: str
    seq: int
    pts: float | None
    capture_time: float
    image: Tensor
    camera_time: float | None = None
    trace: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        img = self.image
        if img.dtype != torch.uint8 or img.dim() != 3 or img.shape[2] != 3:
            raise ValueError(
                f"Frame.image must be uint8 (H, W, 3) RGB, got {tuple(img.shape)} {img.dtype}"
            )

    @property
    def height(self) -> int:
        return int(self.image.shape[0])

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` in pixels."""
        return (self.height, self.width)

    def without_image(self) -> Frame:
        """A copy that drops the pixels (kept small once segmentation is done)."""
        return dataclasses.replace(self, image=_EMPTY_IMAGE)


_EMPTY_IMAGE = torch.zeros((0, 0, 3), dtype=torch.uint8)


@dataclasses.dataclass(frozen=True)
class FrameBatch:
    """Frames of one or more cameras that go through one forward pass.

    Frames may differ in size; the segmenter's preprocessing resizes and pads
    them into one tensor. ``enqueue_times`` (optional, seconds, monotonic)
    lets the runtime measure queueing latency.
    """

    frames: tuple[Frame, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.frames, tuple):
            object.__setattr__(self, "frames", tuple(self.frames))

    def __len__(self) -> int:
        return len(self.frames)

    def __iter__(self):
        return iter(self.frames)

    @property
    def images(self) -> list[Tensor]:
        """The ``uint8 (H, W, 3)`` images, in batch order."""
        return [f.image for f in self.frames]

    @property
    def camera_ids(self) -> list[str]:
        return [f.camera_id for f in self.frames]
