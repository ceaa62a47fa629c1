"""Instance masks in the two forms that flow: frame-size ``bool (N, H, W)``
and box-local crops (``MaskCrops``), and what reads either."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor


class MaskCrops:
    """``N`` bool masks of one frame, each kept as the crop of a box outside which it is 0.

    Attributes:
        image_size: ``(H, W)`` of the frame, pixels.
        boxes: ``int64 (N, 4)`` ``x0, y0, x1, y1`` (exclusive ends) inside
            the frame, on the CPU.
        crops: ``N`` bool tensors, ``crops[i]`` of shape
            ``(y1 - y0, x1 - x0)`` (any device).

    The crops may instead be given packed, as ``flat``: one bool tensor
    holding every crop's pixels row by row, crop after crop (what a model
    copies back from the GPU in one piece); ``crops`` are then views of it,
    made the first time they are asked for.

    Indexing (int, slice, index or bool tensor, list) and ``len()`` work as
    on an ``(N, H, W)`` tensor, and so does ``shape``; ``to_masks()`` pastes
    the crops into frame-size masks for whoever needs them.

    Example:
        >>> crops = MaskCrops(image_size=(4, 6), boxes=torch.tensor([[1, 1, 3, 2]]),
        ...                   crops=(torch.tensor([[True, False]]),))
        >>> crops.to_masks()[0].nonzero().tolist()
        [[1, 1]]
    """

    __slots__ = ("_crops", "_flat", "boxes", "image_size")

    def __init__(
        self,
        *,
        image_size: tuple[int, int],
        boxes: Tensor,
        crops: Sequence[Tensor] | None = None,
        flat: Tensor | None = None,
    ) -> None:
        self.image_size = (int(image_size[0]), int(image_size[1]))
        cpu64 = boxes.device.type == "cpu" and boxes.dtype == torch.int64
        self.boxes = boxes if cpu64 else boxes.to("cpu", torch.int64)
        if (crops is None) == (flat is None):
            raise ValueError("MaskCrops takes either crops or flat (the crops packed), not both")
        self._crops = tuple(crops) if crops is not None else None
        self._flat = flat
        if flat is not None:
            self._validate_flat(flat)
        else:
            self._validate()

    @property
    def crops(self) -> tuple[Tensor, ...]:
        """The ``N`` crops, ``crops[i]`` bool ``(y1 - y0, x1 - x0)``."""
        if self._crops is None:
            assert self._flat is not None
            b = self.boxes.numpy()
            shapes = np.stack((b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]), axis=1).tolist()
            parts = self._flat.split([h * w for h, w in shapes])
            self._crops = tuple(p.view(h, w) for p, (h, w) in zip(parts, shapes, strict=True))
        return self._crops

    def _check_boxes(self) -> np.ndarray:
        """The boxes as numpy, after checking they are ``(N, 4)`` inside the frame."""
        h, w = self.image_size
        if self.boxes.dim() != 2 or self.boxes.shape[1] != 4:
            raise ValueError(f"MaskCrops.boxes must be (N, 4), got {tuple(self.boxes.shape)}")
        # numpy, not torch: a torch call on a tiny tensor hands the GIL to
        # other threads (see docs/performance.md), and this runs per frame.
        b: np.ndarray = self.boxes.numpy()
        inside = (b[:, 0] >= 0) & (b[:, 1] >= 0) & (b[:, 2] <= w) & (b[:, 3] <= h)
        inside &= (b[:, 2] >= b[:, 0]) & (b[:, 3] >= b[:, 1])
        if not inside.all():
            i = int((~inside).nonzero()[0][0])
            raise ValueError(
                f"MaskCrops.boxes[{i}] = {b[i].tolist()} is not inside the {h}x{w} frame"
            )
        return b

    def _validate_flat(self, flat: Tensor) -> None:
        b = self._check_boxes()
        need = int(((b[:, 3] - b[:, 1]) * (b[:, 2] - b[:, 0])).sum())
        if flat.dtype != torch.bool or flat.dim() != 1 or flat.shape[0] != need:
            raise ValueError(
                f"MaskCrops.flat must be bool ({need},) for its boxes, got {flat.dtype} "
                f"{tuple(flat.shape)}"
            )

    def _validate(self) -> None:
        if len(self.boxes) != len(self.crops):
            raise ValueError(
                f"MaskCrops.boxes must be ({len(self.crops)}, 4) for {len(self.crops)} crops, "
                f"got {tuple(self.boxes.shape)}"
            )
        b = self._check_boxes()
        sizes = np.stack((b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]), axis=1).tolist()
        for i, (crop, size) in enumerate(zip(self.crops, sizes, strict=True)):
            if crop.dtype != torch.bool or list(crop.shape) != size:
                raise ValueError(
                    f"MaskCrops.crops[{i}] must be bool {tuple(size)} for its box, "
                    f"got {crop.dtype} {tuple(crop.shape)}"
                )

    @classmethod
    def from_masks(cls, masks: Tensor) -> MaskCrops:
        """Crops of ``(N, H, W)`` bool masks, each to its set pixels' bounding box."""
        n, h, w = masks.shape
        masks = masks.bool()
        rows, cols = masks.any(2), masks.any(1)
        boxes = torch.zeros((n, 4), dtype=torch.int64)
        crops = []
        for i in range(n):
            ys, xs = rows[i].nonzero(), cols[i].nonzero()
            if ys.numel() == 0:
                crops.append(masks.new_zeros((0, 0)))
                continue
            y0, y1, x0, x1 = int(ys[0]), int(ys[-1]) + 1, int(xs[0]), int(xs[-1]) + 1
            boxes[i] = torch.tensor([x0, y0, x1, y1])
            crops.append(masks[i, y0:y1, x0:x1])
        return cls(image_size=(h, w), boxes=boxes, crops=crops)

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(N, H, W)``: the shape of :meth:`to_masks`."""
        return (len(self), *self.image_size)

    @property
    def device(self) -> torch.device:
        if self._flat is not None:
            return self._flat.device
        return self.crops[0].device if self.crops else torch.device("cpu")

    def __getitem__(self, index: int | slice | Tensor | Sequence[int]) -> MaskCrops:
        if isinstance(index, int):
            index = [index]
        if isinstance(index, slice):
            rows = list(range(len(self.crops)))[index]
        else:
            picked = torch.as_tensor(index)
            if picked.dtype == torch.bool:
                picked = picked.nonzero().flatten()
            rows = [r + len(self.crops) if r < 0 else r for r in picked.tolist()]
        return MaskCrops(
            image_size=self.image_size,
            boxes=self.boxes[rows].reshape(-1, 4),
            crops=[self.crops[r] for r in rows],
        )

    def to(self, device: Any) -> MaskCrops:
        """The crops on ``device``, moved in one copy (not one per crop)."""
        target = torch.device(device)
        if not self.crops or self.device == target:
            return self
        flat = torch.cat([c.reshape(-1) for c in self.crops]).to(target)
        parts = flat.split([c.numel() for c in self.crops])
        crops = [p.view(c.shape) for p, c in zip(parts, self.crops, strict=True)]
        return MaskCrops(image_size=self.image_size, boxes=self.boxes, crops=crops)

    def to_masks(self) -> Tensor:
        """The frame-size ``bool (N, H, W)`` masks (zero outside each box)."""
        out = torch.zeros(self.shape, dtype=torch.bool, device=self.device)
        for i, ((x0, y0, x1, y1), crop) in enumerate(
            zip(self.boxes.tolist(), self.crops, strict=True)
        ):
            out[i, y0:y1, x0:x1] = crop
        return out

    def grid(self, stride: int) -> Tensor:
        """``to_masks()[:, s // 2 :: s, s // 2 :: s]`` (``s = stride``) on the CPU, from the crops.

        The coarse masks the tracker's mask IoU and the zones' mask share
        read; each crop gives only the samples that fall in its box.
        """
        s, first = int(stride), int(stride) // 2
        h, w = self.image_size
        out = torch.zeros(
            (len(self.crops), _samples(h, first, s), _samples(w, first, s)), dtype=torch.bool
        )
        for i, ((x0, y0, x1, y1), crop) in enumerate(
            zip(self.boxes.tolist(), self.crops, strict=True)
        ):
            # Sample cells whose pixel first + k * s lies in [start, end).
            gx0, gx1 = _samples(x0, first, s), _samples(x1, first, s)
            gy0, gy1 = _samples(y0, first, s), _samples(y1, first, s)
            if gx1 > gx0 and gy1 > gy0:
                part = crop[first + gy0 * s - y0 :: s, first + gx0 * s - x0 :: s]
                out[i, gy0:gy1, gx0:gx1] = part[: gy1 - gy0, : gx1 - gx0].cpu()
        return out

    @staticmethod
    def cat(items: Sequence[MaskCrops]) -> MaskCrops:
        """The crops of several sets of the same frame size, in order."""
        if not items:
            raise ValueError("MaskCrops.cat needs at least one item")
        size = items[0].image_size
        if any(i.image_size != size for i in items):
            raise ValueError("MaskCrops.cat: all items must have the same image_size")
        return MaskCrops(
            image_size=size,
            boxes=torch.cat([i.boxes for i in items]),
            crops=[c for i in items for c in i.crops],
        )

    def __repr__(self) -> str:
        return f"MaskCrops(n={len(self)}, image_size={self.image_size})"


def _samples(end: int, first: int, stride: int) -> int:
    """How many of the pixels ``first, first + stride, ...`` lie below ``end``."""
    return max(0, -(-(end - first) // stride))


def frame_masks(masks: Tensor | MaskCrops) -> Tensor:
    """``(N, H, W)`` bool frame-size masks of either form."""
    return masks.to_masks() if isinstance(masks, MaskCrops) else masks


def mask_grid(masks: Tensor | MaskCrops, stride: int) -> Tensor:
    """``masks`` sampled every ``stride`` pixels from ``stride // 2``: ``(N, h, w)`` bool, CPU."""
    if isinstance(masks, MaskCrops):
        return masks.grid(stride)
    s = int(stride)
    return masks[:, s // 2 :: s, s // 2 :: s].to("cpu", torch.bool).contiguous()
