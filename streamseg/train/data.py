"""Datasets for training and evaluation: COCO instance JSON and synthetic scenes.

Every dataset yields :class:`Sample` objects whose labels index the training
``class_names`` (``"__background__"`` first), matched to each dataset's own
categories by name, so several datasets with different category ids train
together.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np
import torch
from torch import Tensor

from streamseg.train.images import read_image

__all__ = [
    "CocoDataset",
    "DatasetError",
    "DetectionDataset",
    "GroundTruth",
    "Sample",
    "SyntheticDataset",
    "UnionDataset",
    "decode_segmentation",
]

log = logging.getLogger("streamseg.train")
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


def _label_map(native: Sequence[str], class_names: Sequence[str], source: str) -> list[int]:
    """Native category index -> training label; names absent from training -> -1."""
    index = {name: i for i, name in enumerate(class_names)}
    return [index.get(name, -1) for name in native]


class CocoDataset:
    """A COCO instance-segmentation JSON plus its image folder.

    Args:
        annotations: the JSON file (``images``, ``annotations``, ``categories``).
        images: folder the ``file_name`` entries are relative to (default:
            the JSON's folder).
        crowd_as_instances: treat ``iscrowd: 1`` annotations as instances.

    Crowd annotations (``iscrowd: 1``) are kept for evaluation and left out
    of training targets. Categories the training class list lacks are
    ignored (with a warning).
    """

    def __init__(
        self,
        annotations: str | Path,
        images: str | Path | None = None,
        *,
        crowd_as_instances: bool = False,
    ) -> None:
        self.path = Path(annotations)
        self.crowd_as_instances = crowd_as_instances
        self.image_dir = Path(images) if images is not None else self.path.parent
        data = self._read_json()
        self._categories = [(int(c["id"]), str(c["name"])) for c in data["categories"]]
        self.native_class_names = tuple(name for _, name in self._categories)
        self._cat_index = {cid: i for i, (cid, _) in enumerate(self._categories)}
        self._images: list[dict[str, Any]] = list(data["images"])
        by_id = {int(img["id"]): i for i, img in enumerate(self._images)}
        self._anns: list[list[dict[str, Any]]] = [[] for _ in self._images]
        for ann in data["annotations"]:
            self._check_annotation(ann, by_id)
            self._anns[by_id[int(ann["image_id"])]].append(ann)
        self._labels = list(range(1, len(self._categories) + 1))

    def _read_json(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DatasetError(f"COCO annotations {self.path} do not exist") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise DatasetError(
                f"COCO annotations {self.path} are not readable JSON: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise DatasetError(f"{self.path}: the top level must be a JSON object")
        for key in ("images", "annotations", "categories"):
            if not isinstance(data.get(key), list):
                raise DatasetError(f"{self.path}: missing the {key!r} list of a COCO instance file")
        return data

    def _check_annotation(self, ann: dict[str, Any], by_id: dict[int, int]) -> None:
        where = f"{self.path}: annotation id={ann.get('id')}"
        if int(ann.get("image_id", -1)) not in by_id:
            raise DatasetError(f"{where} refers to image_id={ann.get('image_id')} not in 'images'")
        if int(ann.get("category_id", -1)) not in self._cat_index:
            raise DatasetError(
                f"{where} has category_id={ann.get('category_id')} not in 'categories'"
            )
        if not ann.get("segmentation"):
            raise DatasetError(
                f"{where} has no 'segmentation'; instance segmentation needs masks "
                "(export polygons or RLE masks from your annotation tool)"
            )

    def set_class_names(self, class_names: Sequence[str]) -> None:
        self._labels = _label_map(self.native_class_names, class_names, str(self.path))
        unknown = [
            n for n, lab in zip(self.native_class_names, self._labels, strict=True) if lab < 0
        ]
        if unknown:
            log.warning(
                "%s: categories %s are not trained; their instances are ignored", self.path, unknown
            )

    def __len__(self) -> int:
        return len(self._images)

    def _crowd(self, ann: dict[str, Any]) -> bool:
        return bool(ann.get("iscrowd", 0)) and not self.crowd_as_instances

    def has_instances(self, index: int) -> bool:
        return any(self._keep(a) and not self._crowd(a) for a in self._anns[index])

    def _keep(self, ann: dict[str, Any]) -> bool:
        return self._labels[self._cat_index[int(ann["category_id"])]] > 0

    def _image_size(self, index: int) -> tuple[int, int]:
        info = self._images[index]
        return int(info["height"]), int(info["width"])

    def __getitem__(self, index: int) -> Sample:
        info = self._images[index]
        image = read_image(self.image_dir / str(info["file_name"]))
        h, w = self._image_size(index)
        if tuple(image.shape[:2]) != (h, w):
            raise DatasetError(
                f"{self.path}: image {info['file_name']} is {image.shape[1]}x{image.shape[0]} "
                f"but the JSON says {w}x{h}"
            )
        boxes, labels, masks = [], [], []
        for ann in self._anns[index]:
            if self._crowd(ann) or not self._keep(ann):
                continue
            x, y, bw, bh = (float(v) for v in ann["bbox"])
            if bw < 1 or bh < 1:
                continue
            boxes.append([x, y, x + bw, y + bh])
            labels.append(self._labels[self._cat_index[int(ann["category_id"])]])
            masks.append(torch.from_numpy(self._mask(ann, h, w)))
        return Sample(
            image=image,
            boxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
            labels=torch.tensor(labels, dtype=torch.int64),
            masks=torch.stack(masks).bool() if masks else torch.zeros((0, h, w), dtype=torch.bool),
            image_id=int(info["id"]),
        )

    def _mask(self, ann: dict[str, Any], h: int, w: int) -> np.ndarray:
        try:
            return decode_segmentation(ann["segmentation"], h, w)
        except (ValueError, TypeError, KeyError) as exc:
            raise DatasetError(
                f"{self.path}: annotation id={ann.get('id')}: bad segmentation ({exc})"
            ) from None

    def ground_truth(self, index: int) -> GroundTruth:
        h, w = self._image_size(index)
        anns = []
        for ann in self._anns[index]:
            if not self._keep(ann):
                continue
            rle = segmentation_to_rle(ann["segmentation"], h, w)
            anns.append(
                {
                    "category_id": self._labels[self._cat_index[int(ann["category_id"])]],
                    "bbox": [float(v) for v in ann["bbox"]],
                    "area": float(ann.get("area") or _rle_area(rle)),
                    "iscrowd": int(self._crowd(ann)),
                    "segmentation": {"size": rle["size"], "counts": rle["counts"].decode("ascii")},
                }
            )
        return GroundTruth(int(self._images[index]["id"]), h, w, anns)


def _rle_area(rle: dict[str, Any]) -> float:
    import faster_coco_eval.core.mask as mask_api

    return float(mask_api.area(rle))


class SyntheticDataset:
    """Frames of a synthetic scene with exact ground truth, made on the fly.

    Args:
        url: ``synthetic://?seed=..&width=..&height=..`` (the scene's own
            parameters); ``frames``, ``stride`` and ``start`` query parameters,
            when present, override the keyword arguments.
        frames: how many frames.
        stride: take every ``stride``-th frame of the scene.
        start: index of the first frame.
    """

    def __init__(self, url: str, *, frames: int = 100, stride: int = 1, start: int = 0) -> None:
        from streamseg.synthetic.scene import SyntheticScene

        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        try:
            frames = int(query.pop("frames", frames))
            stride = int(query.pop("stride", stride))
            start = int(query.pop("start", start))
        except ValueError:
            raise DatasetError(f"{url}: frames, stride and start must be integers") from None
        if frames < 1 or stride < 1 or start < 0:
            raise DatasetError(f"{url}: frames and stride must be >= 1, start >= 0")
        self.url = url
        try:
            self.scene = SyntheticScene.from_url(f"synthetic://?{urlencode(query)}")
        except ValueError as exc:
            raise DatasetError(
                f"{url}: {exc} (this dataset also takes frames, stride, start)"
            ) from None
        self.frames, self.stride, self.start = frames, stride, start
        self.native_class_names = tuple(n for n in self.scene.class_names if n != BACKGROUND)
        self._labels = torch.arange(len(self.scene.class_names), dtype=torch.int64)
        self._last: tuple[int, Sample] | None = None  # ground_truth(i) right after self[i]

    def set_class_names(self, class_names: Sequence[str]) -> None:
        index = {name: i for i, name in enumerate(class_names)}
        self._labels = torch.tensor(
            [index.get(n, -1) if n != BACKGROUND else 0 for n in self.scene.class_names],
            dtype=torch.int64,
        )
        self._last = None

    def __len__(self) -> int:
        return self.frames

    def has_instances(self, index: int) -> bool:
        """Always true: frames are not rendered just to check (empty ones train as negatives)."""
        return True

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < self.frames:
            raise IndexError(index)
        if self._last is not None and self._last[0] == index:
            return self._last[1]
        frame = self.scene.frame(self.start + index * self.stride)
        gt = frame.gt
        labels = self._labels[gt.labels.cpu()]
        keep = labels > 0
        masks = gt.frame_masks()
        if masks is None:
            masks = _box_masks(gt.boxes, gt.image_size)
        boxes, labels, masks = gt.boxes[keep].float().cpu(), labels[keep], masks[keep].bool().cpu()
        if gt.regions is not None:  # each stuff class present is one more segment
            stuff = gt.regions.masks()
            stuff_labels = self._labels[gt.regions.labels]
            wanted = stuff_labels > 0
            boxes = torch.cat((boxes, _tight_boxes(stuff[wanted])))
            labels = torch.cat((labels, stuff_labels[wanted]))
            masks = torch.cat((masks, stuff[wanted]))
        sample = Sample(
            image=frame.image.cpu(), boxes=boxes, labels=labels, masks=masks, image_id=index
        )
        self._last = (index, sample)
        return sample

    def stuff_labels(self) -> set[int]:
        """Training labels of the scene's stuff classes (regions, not instances)."""
        index = {n: i for i, n in enumerate(self.scene.class_names)}
        ids = self._labels[[index[n] for n in self.scene.stuff_class_names]].tolist()
        return {i for i in ids if i > 0}

    def ground_truth(self, index: int) -> GroundTruth:
        sample = self[index]
        stuff = self.stuff_labels()
        anns: list[dict[str, Any]] = []
        segments = torch.zeros((*sample.size, 2), dtype=torch.int64) if stuff else None
        rows = zip(sample.boxes, sample.labels, sample.masks, strict=True)
        for box, label, mask in rows:
            if segments is not None:
                segments[mask, 0] = label
            if int(label) in stuff:
                continue
            if segments is not None:
                segments[mask, 1] = len(anns) + 1
            x1, y1, x2, y2 = (float(v) for v in box)
            anns.append(
                {
                    "category_id": int(label),
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": float(mask.sum()),
                    "iscrowd": 0,
                    "segmentation": encode_mask(mask),
                }
            )
        h, w = sample.size
        return GroundTruth(index, h, w, anns, segments)


def _tight_boxes(masks: Tensor) -> Tensor:
    """``float32 (N, 4)`` xyxy boxes around ``bool (N, H, W)`` masks (exclusive ends)."""
    from streamseg.models.mask2former.postprocess import masks_to_boxes

    return masks_to_boxes(masks)


def _box_masks(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    h, w = size
    ys = torch.arange(h).view(1, h, 1)
    xs = torch.arange(w).view(1, 1, w)
    b = boxes.view(-1, 4, 1, 1)
    return (xs >= b[:, 0]) & (xs < b[:, 2]) & (ys >= b[:, 1]) & (ys < b[:, 3])


class UnionDataset:
    """Several datasets one after another, with unique image ids."""

    def __init__(self, datasets: Sequence[DetectionDataset]) -> None:
        if not datasets:
            raise DatasetError("no datasets given")
        self.datasets = list(datasets)
        self._offsets = np.cumsum([0] + [len(d) for d in self.datasets])
        names: list[str] = []
        for d in self.datasets:
            names += [n for n in d.native_class_names if n not in names]
        self.native_class_names = tuple(names)

    def set_class_names(self, class_names: Sequence[str]) -> None:
        for d in self.datasets:
            d.set_class_names(class_names)

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def _locate(self, index: int) -> tuple[int, int]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        which = int(np.searchsorted(self._offsets, index, side="right")) - 1
        return which, index - int(self._offsets[which])

    def __getitem__(self, index: int) -> Sample:
        which, local = self._locate(index)
        return dataclasses.replace(self.datasets[which][local], image_id=index)

    def has_instances(self, index: int) -> bool:
        which, local = self._locate(index)
        return self.datasets[which].has_instances(local)

    def stuff_labels(self) -> set[int]:
        """Training labels that some part holds as stuff (synthetic scenes with stuff)."""
        out: set[int] = set()
        for d in self.datasets:
            stuff_of = getattr(d, "stuff_labels", None)
            out |= stuff_of() if stuff_of is not None else set()
        return out

    def ground_truth(self, index: int) -> GroundTruth:
        which, local = self._locate(index)
        return dataclasses.replace(self.datasets[which].ground_truth(local), image_id=index)
