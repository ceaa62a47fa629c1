"""A COCO-format dataset: instance annotations (polygons or RLE) and their images."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamseg.train.data.common import (
    DatasetError,
    GroundTruth,
    Sample,
    decode_segmentation,
    label_map,
    rle_area,
    segmentation_to_rle,
)
from streamseg.train.data.merge import merge_coco
from streamseg.train.images import read_image

__all__ = ["CocoDataset"]

log = logging.getLogger("streamseg.train")


class CocoDataset:
    """A COCO instance-segmentation JSON plus its image folder.

    Args:
        annotations: the JSON file (``images``, ``annotations``,
            ``categories``), or several over the same images, read as one
            (:func:`streamseg.train.data.merge.merge_coco`: images matched by
            file name, the first file's annotations win where two overlap).
        images: folder the ``file_name`` entries are relative to (default:
            the (first) JSON's folder).
        crowd_as_instances: treat ``iscrowd: 1`` annotations as instances.

    Crowd annotations (``iscrowd: 1``) are kept for evaluation and left out
    of training targets. Categories the training class list lacks are
    ignored (with a warning).
    """

    def __init__(
        self,
        annotations: str | Path | Sequence[str | Path],
        images: str | Path | None = None,
        *,
        crowd_as_instances: bool = False,
    ) -> None:
        paths = (
            [Path(annotations)]
            if isinstance(annotations, str | Path)
            else [Path(a) for a in annotations]
        )
        if not paths:
            raise DatasetError("no COCO annotation file given")
        # Messages name the file, or all of them when several are read as one.
        self.path = paths[0] if len(paths) == 1 else Path(" + ".join(map(str, paths)))
        self.crowd_as_instances = crowd_as_instances
        self.image_dir = Path(images) if images is not None else paths[0].parent
        datas = [self._read_json(p) for p in paths]
        data = (
            datas[0] if len(datas) == 1 else merge_coco(datas, paths, image_dir=self.image_dir)[0]
        )
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

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DatasetError(f"COCO annotations {path} do not exist") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise DatasetError(f"COCO annotations {path} are not readable JSON: {exc}") from None
        if not isinstance(data, dict):
            raise DatasetError(f"{path}: the top level must be a JSON object")
        for key in ("images", "annotations", "categories"):
            if not isinstance(data.get(key), list):
                raise DatasetError(f"{path}: missing the {key!r} list of a COCO instance file")
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
        self._labels = label_map(self.native_class_names, class_names, str(self.path))
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
                    "area": float(ann.get("area") or rle_area(rle)),
                    "iscrowd": int(self._crowd(ann)),
                    "segmentation": {"size": rle["size"], "counts": rle["counts"].decode("ascii")},
                }
            )
        return GroundTruth(int(self._images[index]["id"]), h, w, anns)
