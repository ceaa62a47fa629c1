"""``Regions``: the "stuff" of one frame (road, floor, water), as a class-label map.

Semantic and panoptic segmentation (Mask2Former's ``task: semantic`` /
``panoptic``) say which class every pixel shows. Countable things come out as
:class:`streamseg.types.Instances`; the rest, regions of classes without
instances, travel as one ``Regions`` per frame, carried by that frame's
``Instances`` (``Instances.regions``). Imported as ``from streamseg.types
import Regions``.

The form is a label map: cheap to make from a per-pixel argmax, disjoint by
construction, and every question the rules ask ("how much of this zone is
water", "what lies around this object") is a look-up in it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["Regions"]

# Label maps hold class ids up to this (pipeline.yaml allows 10,000 classes).
LABEL_DTYPE = torch.int16


class Regions:
    """The class regions of one frame.

    Attributes:
        label_map: ``int16 (H, W)`` class id of the region each pixel
            belongs to, ``0`` where none does (a thing's pixels in panoptic
            mode, or pixels no segment kept); any device.
        labels: ``int64 (M,)`` the classes present, ascending, on the CPU.
        areas: ``int64 (M,)`` pixels of each, on the CPU.

    Build one with :meth:`from_label_map`. ``masks()`` gives the ``(M, H, W)``
    bool masks; ``grid(stride)`` a coarse CPU copy for the rules.

    Example:
        >>> r = Regions.from_label_map(torch.tensor([[0, 5], [5, 7]]))
        >>> r.labels.tolist(), r.areas.tolist()
        ([5, 7], [2, 1])
    """

    __slots__ = ("label_map", "labels", "areas")

    def __init__(self, *, label_map: Tensor, labels: Tensor, areas: Tensor) -> None:
        if label_map.dim() != 2 or label_map.dtype != LABEL_DTYPE:
            raise ValueError(
                f"Regions.label_map must be int16 (H, W), got {label_map.dtype} "
                f"{tuple(label_map.shape)}"
            )
        if labels.dim() != 1 or labels.shape != areas.shape:
            raise ValueError(
                f"Regions.labels and areas must be (M,) each, got {tuple(labels.shape)} "
                f"and {tuple(areas.shape)}"
            )
        self.label_map = label_map
        self.labels = labels.to("cpu", torch.int64)
        self.areas = areas.to("cpu", torch.int64)

    @classmethod
    def from_label_map(cls, label_map: Tensor) -> Regions:
        """The regions of a label map (any integer dtype; ``0`` is "no region")."""
        label_map = label_map.to(LABEL_DTYPE)
        counts = torch.bincount(label_map.flatten().long()).cpu()
        labels = counts.nonzero().flatten()
        labels = labels[labels > 0]
        return cls(label_map=label_map, labels=labels, areas=counts[labels])

    @classmethod
    def empty(cls, image_size: tuple[int, int], *, device: Any = "cpu") -> Regions:
        """No region at all (a frame of ``image_size`` ``(H, W)``)."""
        none = torch.zeros(0, dtype=torch.int64)
        label_map = torch.zeros(image_size, dtype=LABEL_DTYPE, device=device)
        return cls(label_map=label_map, labels=none, areas=none)

    @property
    def image_size(self) -> tuple[int, int]:
        """``(H, W)`` pixels."""
        return (int(self.label_map.shape[0]), int(self.label_map.shape[1]))

    @property
    def device(self) -> torch.device:
        return self.label_map.device

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def masks(self) -> Tensor:
        """``bool (M, H, W)``: each region's pixels, in the order of ``labels``."""
        wanted = self.labels.to(self.device, LABEL_DTYPE)
        return self.label_map[None] == wanted[:, None, None]

    def grid(self, stride: int) -> Tensor:
        """``label_map[s // 2 :: s, s // 2 :: s]`` (``s = stride``) on the CPU, int64.

        The same samples as :func:`streamseg.types.mask_grid` takes of masks,
        so region and mask grids line up cell for cell.
        """
        s = int(stride)
        return self.label_map[s // 2 :: s, s // 2 :: s].to("cpu", torch.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """The regions as numpy arrays (CPU), for another process; see :meth:`from_arrays`."""
        return {
            "label_map": self.label_map.cpu().numpy(),
            "labels": self.labels.numpy(),
            "areas": self.areas.numpy(),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Regions:
        """The regions :meth:`arrays` gave (no copy)."""
        return cls(**{k: torch.from_numpy(v) for k, v in arrays.items()})

    def to(self, device: Any) -> Regions:
        if torch.device(device) == self.device:
            return self
        return Regions(label_map=self.label_map.to(device), labels=self.labels, areas=self.areas)

    def __repr__(self) -> str:
        return f"Regions(labels={self.labels.tolist()}, image_size={self.image_size})"
