"""What the model finds in one frame (``Instances``), and a frame with it (``FrameResult``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from streamseg.types.frames import Frame
from streamseg.types.masks import MaskCrops, frame_masks
from streamseg.types.regions import Regions


class Instances:
    """Object instances found in one frame: parallel tensors of length ``N``.

    Attributes:
        image_size: ``(H, W)`` of the frame, pixels.
        boxes: ``float32 (N, 4)`` ``xyxy`` in frame pixels.
        scores: ``float32 (N,)`` confidence in ``[0, 1]``.
        labels: ``int64 (N,)`` class ids (``>= 1``; 0 is background).
        masks: ``bool (N, H, W)`` at frame resolution, or :class:`MaskCrops`
            (box-local crops, what serving's Mask R-CNN gives), or ``None``
            when the model gives no masks; :meth:`frame_masks` gives the
            frame-size form of either.
        track_ids: ``int64 (N,)`` track id per instance once tracked (``-1``
            for instances no track took), else ``None``.
        regions: the frame's class regions (:class:`Regions`: semantic and
            panoptic models' "stuff"), else ``None``. A frame-level field:
            indexing keeps it whole.

    Supports ``len()``, indexing by an int, slice, index tensor or boolean
    mask (``inst[inst.scores > 0.5]``), and ``Instances.empty(size)``.
    Construction validates shapes; instances are never mutated in place:
    ``replace()`` returns a new object.

    Example:
        >>> inst = Instances.empty((480, 640))
        >>> len(inst)
        0
    """

    __slots__ = ("image_size", "boxes", "scores", "labels", "masks", "track_ids", "regions")

    def __init__(
        self,
        *,
        image_size: tuple[int, int],
        boxes: Tensor,
        scores: Tensor,
        labels: Tensor,
        masks: Tensor | MaskCrops | None = None,
        track_ids: Tensor | None = None,
        regions: Regions | None = None,
    ) -> None:
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.boxes = boxes
        self.scores = scores
        self.labels = labels
        self.masks = masks
        self.track_ids = track_ids
        self.regions = regions
        self._validate()

    def _validate(self) -> None:
        n = self.boxes.shape[0] if self.boxes.dim() == 2 else -1
        if self.boxes.dim() != 2 or self.boxes.shape[1] != 4:
            raise ValueError(f"Instances.boxes must be (N, 4), got {tuple(self.boxes.shape)}")
        for name in ("scores", "labels", "track_ids"):
            t = getattr(self, name)
            if t is not None and (t.dim() != 1 or t.shape[0] != n):
                raise ValueError(f"Instances.{name} must be ({n},), got {tuple(t.shape)}")
        if self.masks is not None:
            h, w = self.image_size
            if isinstance(self.masks, MaskCrops):
                if self.masks.shape != (n, h, w):
                    raise ValueError(
                        f"Instances.masks must be ({n}, {h}, {w}) crops, got {self.masks.shape}"
                    )
            elif self.masks.dim() != 3 or tuple(self.masks.shape) != (n, h, w):
                raise ValueError(
                    f"Instances.masks must be ({n}, {h}, {w}), got {tuple(self.masks.shape)}"
                )
        if self.regions is not None and self.regions.image_size != self.image_size:
            raise ValueError(
                f"Instances.regions are {self.regions.image_size}, "
                f"not the frame's {self.image_size}"
            )

    @classmethod
    def empty(
        cls, image_size: tuple[int, int], *, with_masks: bool = True, device: Any = "cpu"
    ) -> Instances:
        h, w = image_size
        return cls(
            image_size=image_size,
            boxes=torch.zeros((0, 4), dtype=torch.float32, device=device),
            scores=torch.zeros((0,), dtype=torch.float32, device=device),
            labels=torch.zeros((0,), dtype=torch.int64, device=device),
            masks=torch.zeros((0, h, w), dtype=torch.bool, device=device) if with_masks else None,
        )

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    def __getitem__(self, index: int | slice | Tensor | Sequence[int]) -> Instances:
        if isinstance(index, int):
            index = slice(index, index + 1 if index != -1 else None)
        elif not isinstance(index, slice | Tensor):
            index = torch.as_tensor(index, dtype=torch.int64, device=self.boxes.device)
        return Instances(
            image_size=self.image_size,
            boxes=self.boxes[index],
            scores=self.scores[index],
            labels=self.labels[index],
            masks=None if self.masks is None else self.masks[index],
            track_ids=None if self.track_ids is None else self.track_ids[index],
            regions=self.regions,
        )

    @property
    def device(self) -> torch.device:
        return self.boxes.device

    def replace(self, **changes: Any) -> Instances:
        """A new ``Instances`` with some fields replaced (the original is untouched)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return Instances(**fields)

    def to(self, device: Any) -> Instances:
        moved: dict[str, Any] = {
            name: (None if getattr(self, name) is None else getattr(self, name).to(device))
            for name in self.__slots__
            if name != "image_size"
        }
        return Instances(image_size=self.image_size, **moved)

    @staticmethod
    def cat(items: Sequence[Instances]) -> Instances:
        """Concatenate instances of the same frame size (``regions``: the first item's)."""
        if not items:
            raise ValueError("Instances.cat needs at least one item")
        size = items[0].image_size
        if any(i.image_size != size for i in items):
            raise ValueError("Instances.cat: all items must have the same image_size")

        def cat_opt(name: str) -> Tensor | None:
            parts = [getattr(i, name) for i in items]
            if any(p is None for p in parts):
                return None
            return torch.cat(parts)

        masks: Tensor | MaskCrops | None = None
        parts = [i.masks for i in items]
        if all(isinstance(p, MaskCrops) for p in parts):
            masks = MaskCrops.cat([p for p in parts if isinstance(p, MaskCrops)])
        elif all(p is not None for p in parts):
            masks = torch.cat([frame_masks(p) for p in parts if p is not None])
        return Instances(
            image_size=size,
            boxes=torch.cat([i.boxes for i in items]),
            scores=torch.cat([i.scores for i in items]),
            labels=torch.cat([i.labels for i in items]),
            masks=masks,
            track_ids=cat_opt("track_ids"),
            regions=items[0].regions,
        )

    def frame_masks(self) -> Tensor | None:
        """The masks as ``bool (N, H, W)`` at frame resolution (crops pasted), or ``None``."""
        return None if self.masks is None else frame_masks(self.masks)

    def __repr__(self) -> str:
        return (
            f"Instances(n={len(self)}, image_size={self.image_size}, "
            f"masks={'yes' if self.masks is not None else 'no'}, "
            f"tracked={'yes' if self.track_ids is not None else 'no'})"
        )


@dataclasses.dataclass(frozen=True)
class FrameResult:
    """A frame (usually without its pixels) and the instances found in it."""

    frame: Frame
    instances: Instances
