"""A zero-cost "model" for benchmarks: the synthetic scene's exact instances.

``OracleSegmenter`` has the ``Segmenter`` interface (``class_names``,
``segment(batch)``, ``submit(batch)``, ``warm_up``, ``close``) but runs no network: for each
frame it returns the ground truth of the scene frame it shows (boxes,
labels, masks, score 1), found by the frame's camera and
``Frame.seq``. Sources number frames from 0 in the order they read them
(a synthetic camera's ``seq`` is the scene's frame index, a file's is the
decoded frame's position), so a clip rendered from frames ``0..n-1`` of a
scene lines up with that scene's ground truth.

The truth is kept compact (each mask as the crop of its box) and handed on
as ``MaskCrops``, the form Mask R-CNN's post-processing gives serve.

Example:
    >>> from streamseg.synthetic.scene import SyntheticScene
    >>> scene = SyntheticScene(seed=1, height=48, width=64, num_frames=2)
    >>> oracle = OracleSegmenter.from_scene(scene, ["cam"], frames=2)
    >>> batch = FrameBatch((scene.frame(1).to_frame("cam"),))
    >>> len(oracle.segment(batch)[0]) == len(scene.frame(1).gt)
    True
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future

import torch
from torch import Tensor

from streamseg.segment.segmenter import done_future
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import FrameBatch, Instances, MaskCrops

__all__ = ["FrameTruth", "OracleSegmenter"]


@dataclasses.dataclass(frozen=True)
class FrameTruth:
    """One frame's instances with each mask cropped to its box.

    Attributes:
        image_size: ``(H, W)`` of the frame.
        boxes: ``float32 (N, 4)`` xyxy, integer-valued (tight around the mask).
        labels: ``int64 (N,)``.
        crops: ``bool`` ``(y2 - y1, x2 - x1)`` masks, one per box.
    """

    image_size: tuple[int, int]
    boxes: Tensor
    labels: Tensor
    crops: tuple[Tensor, ...]
    corners: Tensor = dataclasses.field(init=False, repr=False, compare=False)
    scores: Tensor = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Made once: a torch call per frame would let other threads take the
        # GIL in the middle of the host path the benchmark times.
        object.__setattr__(self, "corners", self.boxes.to(torch.int64))
        object.__setattr__(self, "scores", torch.ones((len(self.crops),), dtype=torch.float32))

    @classmethod
    def of(cls, gt: Instances) -> FrameTruth:
        """The compact form of ``gt`` (a ``SceneFrame.gt``, with masks)."""
        masks = gt.frame_masks()
        if masks is None:
            raise ValueError("FrameTruth needs instances with masks")
        corners = gt.boxes.round().to(torch.int64).tolist()
        crops = tuple(masks[i, y1:y2, x1:x2].clone() for i, (x1, y1, x2, y2) in enumerate(corners))
        return cls(gt.image_size, gt.boxes.clone(), gt.labels.clone(), crops)

    def instances(self) -> Instances:
        """``Instances`` with box-local ``MaskCrops`` (scores 1, no track ids), the
        form Mask R-CNN's post-processing hands to the host path."""
        masks = MaskCrops(image_size=self.image_size, boxes=self.corners, crops=self.crops)
        return Instances(
            image_size=self.image_size,
            boxes=self.boxes,
            scores=self.scores,
            labels=self.labels,
            masks=masks,
        )


class OracleSegmenter:
    """``Segmenter``'s interface, answering with known ground truth.

    Args:
        truth: ``{camera id: [FrameTruth of frame 0, 1, ...]}``; cameras may
            share one list.
        class_names: the names the labels index (index 0 is background).

    ``segment`` raises ``KeyError`` for a frame it has no truth for (an
    unknown camera, or ``seq`` past the end), naming the camera and frame.
    """

    device = "cpu"

    def __init__(
        self, *, truth: Mapping[str, Sequence[FrameTruth]], class_names: Sequence[str]
    ) -> None:
        self._truth = dict(truth)
        self._class_names = tuple(class_names)
        self.cpu_seconds = 0.0  # CPU time of segment(), every batch (the pipeline's "model")

    @classmethod
    def from_scene(
        cls, scene: SyntheticScene, cameras: Sequence[str], *, frames: int
    ) -> OracleSegmenter:
        """Every camera of ``cameras`` showing frames ``0..frames-1`` of ``scene``."""
        truth = [FrameTruth.of(scene.frame(i).gt) for i in range(frames)]
        return cls(truth=dict.fromkeys(cameras, truth), class_names=scene.class_names)

    @property
    def class_names(self) -> tuple[str, ...]:
        return self._class_names

    def segment(self, batch: FrameBatch) -> list[Instances]:
        """The ground truth of each frame of ``batch``, in order."""
        cpu0 = time.thread_time()
        out = []
        for frame in batch:
            frames = self._truth.get(frame.camera_id, ())
            if not 0 <= frame.seq < len(frames):
                raise KeyError(
                    f"oracle: no ground truth for camera {frame.camera_id!r} frame {frame.seq} "
                    f"({len(frames)} frames known)"
                )
            truth = frames[frame.seq]
            if truth.image_size != frame.size:
                raise ValueError(
                    f"oracle: camera {frame.camera_id!r} frame {frame.seq} is "
                    f"{frame.size}, its ground truth {truth.image_size}"
                )
            out.append(truth.instances())
        self.cpu_seconds += time.thread_time() - cpu0
        return out

    def submit(self, batch: FrameBatch) -> Future[list[Instances]]:
        """:meth:`segment` as a done future (``SegmenterLike``)."""
        return done_future(self.segment, batch)

    @property
    def ops_on_reference(self) -> dict[str, str]:
        """No post-processing op runs here."""
        return {}

    def health(self) -> None:
        """No process of its own."""
        return None

    def warm_up(self) -> float:
        return 0.0

    def close(self) -> None:
        """Nothing to release."""
