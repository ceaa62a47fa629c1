"""What every training dataset gives: samples, ground truth, the dataset protocol, and
the mask encodings they share (COCO polygons and RLE)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from torch import Tensor

__all__ = [
    "BACKGROUND",
    "DatasetError",
    "DetectionDataset",
    "GroundTruth",
    "Sample",
    "decode_segmentation",
    "encode_mask",
    "label_map",
    "rle_area",
    "segmentation_to_rle",
]


BACKGROUND = "__background__"


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file and the entry."""


@dataclasses.dataclass(frozen=True)
class Sample:
    """One training image and its instances.

    Attributes:
        image: ``uint8 (H, W, 3)`` RGB.
        boxes: ``float32 (N, 4)`` ``xyxy`` pixels.
        labels: ``int64 (N,)`` indices into the training class names (>= 1).
        masks: ``bool (N, H, W)``.
        image_id: the dataset's id of the image.
    """

    image: Tensor
    boxes: Tensor
    labels: Tensor
    masks: Tensor
    image_id: int

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` in pixels."""
        return (int(self.image.shape[0]), int(self.image.shape[1]))

    def __len__(self) -> int:
        """Number of instances."""
        return int(self.labels.shape[0])


@dataclasses.dataclass(frozen=True)
class GroundTruth:
    """COCO-style ground truth of one image (crowd regions included).

    ``annotations`` entries have ``category_id`` (a training label),
    ``bbox`` (``xywh``), ``area``, ``iscrowd`` and ``segmentation`` (compressed
    RLE with ``counts`` as str): the things, for AP. ``segments``: the
    panoptic ground truth where the dataset has one (synthetic scenes with
    stuff), ``int64 (H, W, 2)``: each pixel's training label (0: void) and
    instance number (things ``1..N``, 0 for stuff); else ``None``.
    """

    image_id: int
    height: int
    width: int
    annotations: list[dict[str, Any]]
    segments: Tensor | None = None


class DetectionDataset(Protocol):
    """What the trainer and the evaluator need from a dataset."""

    native_class_names: tuple[str, ...]  # the dataset's own categories, no background

    def set_class_names(self, class_names: Sequence[str]) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Sample: ...
    def ground_truth(self, index: int) -> GroundTruth: ...
    def has_instances(self, index: int) -> bool: ...


def decode_segmentation(segmentation: Any, height: int, width: int) -> np.ndarray:
    """COCO polygons, uncompressed or compressed RLE -> ``uint8 (H, W)`` mask."""
    import faster_coco_eval.core.mask as mask_api

    rle = segmentation_to_rle(segmentation, height, width)
    return np.asarray(mask_api.decode(rle), dtype=np.uint8)


def segmentation_to_rle(segmentation: Any, height: int, width: int) -> dict[str, Any]:
    """Any COCO segmentation -> compressed RLE ``{"size", "counts": bytes}``."""
    import faster_coco_eval.core.mask as mask_api

    if isinstance(segmentation, list):
        polygons = [p for p in segmentation if len(p) >= 6]
        if not polygons:
            raise ValueError("polygon with fewer than 3 points")
        return dict(mask_api.merge(mask_api.frPyObjects(polygons, height, width)))
    if isinstance(segmentation, dict) and "counts" in segmentation:
        if isinstance(segmentation["counts"], list):
            return dict(mask_api.frPyObjects(segmentation, height, width))
        counts = segmentation["counts"]
        return {"size": list(segmentation["size"]), "counts": _as_bytes(counts)}
    raise ValueError(f"unsupported segmentation of type {type(segmentation).__name__}")


def encode_mask(mask: np.ndarray | Tensor) -> dict[str, Any]:
    """``bool/uint8 (H, W)`` -> COCO compressed RLE with ``counts`` as str."""
    import faster_coco_eval.core.mask as mask_api

    array = mask.numpy() if isinstance(mask, Tensor) else mask
    rle = mask_api.encode(np.asfortranarray(array.astype(np.uint8)[:, :, None]))[0]
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def _as_bytes(counts: str | bytes) -> bytes:
    return counts.encode("ascii") if isinstance(counts, str) else counts


def label_map(native: Sequence[str], class_names: Sequence[str], source: str) -> list[int]:
    """Native category index -> training label; names absent from training -> -1."""
    index = {name: i for i, name in enumerate(class_names)}
    return [index.get(name, -1) for name in native]


def rle_area(rle: dict[str, Any]) -> float:
    import faster_coco_eval.core.mask as mask_api

    return float(mask_api.area(rle))
