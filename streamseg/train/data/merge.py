"""Several COCO files over the same images read as one: hand labels plus teacher labels.

The workflow of teaching a model a new class: ``streamseg label`` writes the
frames of new footage with the current model's labels of the classes it
knows, a person labels only the new class on the same frames, and ``train``
reads both as one dataset (``annotations: [hand.json, teacher.json]``).

Rules (:func:`merge_coco`):

* images are matched by ``file_name`` (exactly, else by the file's base
  name when that is unique: an annotation tool may export base names only);
  the first file listing an image gives its size, and its name unless only
  another file's name exists in the image folder; a file giving another
  size is an error;
* categories are matched by name (ids are renumbered);
* the files are in order of trust: an annotation overlapping one of an
  earlier file on the same image (mask IoU >= ``overlap``) is left out (the
  teacher's guess at an object a person labelled); every other annotation
  is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from streamseg.train.data.common import DatasetError, segmentation_to_rle

__all__ = ["OVERLAP_IOU", "merge_coco"]

log = logging.getLogger("streamseg.train")

# Mask IoU from which an annotation of a later file is the same object as
# one of an earlier file (COCO's own threshold for "the same object").
OVERLAP_IOU = 0.5


def merge_coco(
    datas: Sequence[dict[str, Any]],
    paths: Sequence[Path],
    *,
    image_dir: Path | None = None,
    overlap: float = OVERLAP_IOU,
) -> tuple[dict[str, Any], dict[str, int]]:
    """One COCO instance dict from several over the same images (see the module doc).

    Args:
        datas: the files' parsed JSON (``images``, ``annotations``,
            ``categories`` lists), in order of trust.
        paths: their paths, for messages.
        image_dir: the folder file names are relative to, where known.
        overlap: mask IoU from which a later annotation duplicates an earlier one.

    Returns:
        the merged dict (fresh image, annotation and category ids) and the
        counts: ``{str(path): annotations kept}`` per file, and
        ``"overlapping"``: annotations left out.
    """
    categories: dict[str, int] = {}
    images: list[dict[str, Any]] = []
    by_name: dict[str, int] = {}  # file_name -> index into images
    by_base: dict[str, list[int]] = {}
    kept: list[list[dict[str, Any]]] = []  # per merged image
    report = {"overlapping": 0}
    for data, path in zip(datas, paths, strict=True):
        cat_of = {}
        for cat in data["categories"]:
            cat_of[int(cat["id"])] = categories.setdefault(str(cat["name"]), len(categories) + 1)
        image_of: dict[int, int] = {}
        for info in data["images"]:
            index = _find(info, by_name, by_base)
            if index is None:
                index = len(images)
                images.append({**info, "id": index + 1})
                by_name[str(info["file_name"])] = index
                by_base.setdefault(PurePosixPath(str(info["file_name"])).name, []).append(index)
                kept.append([])
            elif (int(info["height"]), int(info["width"])) != _size(images[index]):
                raise DatasetError(
                    f"{path}: image {info['file_name']} is {info['width']}x{info['height']} "
                    f"but {images[index]['file_name']} of an earlier file is "
                    f"{images[index]['width']}x{images[index]['height']}"
                )
            elif image_dir is not None and not (image_dir / images[index]["file_name"]).exists():
                images[index]["file_name"] = info["file_name"]
            image_of[int(info["id"])] = index
        earlier = [list(anns) for anns in kept]  # what this file's annotations defer to
        count = 0
        for ann in data["annotations"]:
            index = image_of.get(int(ann.get("image_id", -1)))
            category = cat_of.get(int(ann.get("category_id", -1)))
            if index is None or category is None:
                raise DatasetError(
                    f"{path}: annotation id={ann.get('id')} refers to image_id="
                    f"{ann.get('image_id')} / category_id={ann.get('category_id')} it does not list"
                )
            if earlier[index] and _overlaps(ann, earlier[index], images[index], overlap):
                report["overlapping"] += 1
                continue
            kept[index].append({**ann, "image_id": index + 1, "category_id": category})
            count += 1
        report[str(path)] = count
    annotations = [a for anns in kept for a in anns]
    for i, ann in enumerate(annotations):
        ann["id"] = i + 1
    merged = {
        "images": images,
        "annotations": annotations,
        "categories": [{"id": i, "name": n} for n, i in categories.items()],
    }
    log.info(
        "merged %s: kept %s; left out %d annotations overlapping one of an earlier file",
        " + ".join(map(str, paths)),
        ", ".join(f"{report[str(p)]} of {p}" for p in paths),
        report["overlapping"],
    )
    return merged, report


def _find(
    info: dict[str, Any], by_name: dict[str, int], by_base: dict[str, list[int]]
) -> int | None:
    name = str(info["file_name"])
    if name in by_name:
        return by_name[name]
    same_base = by_base.get(PurePosixPath(name).name, [])
    return same_base[0] if len(same_base) == 1 else None


def _size(info: dict[str, Any]) -> tuple[int, int]:
    return int(info["height"]), int(info["width"])


def _overlaps(
    ann: dict[str, Any], others: list[dict[str, Any]], image: dict[str, Any], overlap: float
) -> bool:
    """Whether ``ann``'s mask has IoU >= ``overlap`` with one of ``others``'."""
    import faster_coco_eval.core.mask as mask_api

    h, w = _size(image)
    try:
        mine = [segmentation_to_rle(ann["segmentation"], h, w)]
        theirs = [segmentation_to_rle(o["segmentation"], h, w) for o in others]
    except (ValueError, TypeError, KeyError):
        return False  # the dataset reports a bad segmentation when it reads it
    ious = mask_api.iou(mine, theirs, [0] * len(theirs))
    return bool((ious >= overlap).any())
