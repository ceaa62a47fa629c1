"""A tiny COCO instance-segmentation dataset written to disk (PNG + JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from streamseg.train.data import encode_mask
from streamseg.train.images import write_png


def write_coco(
    folder: Path, *, images: int = 4, height: int = 48, width: int = 64, seed: int = 0
) -> Path:
    """Images with 1-3 coloured rectangles; masks as RLE and as polygons.

    Categories have ids 7 ("red") and 3 ("green") so label mapping by name is
    exercised; one crowd annotation is added to the first image.
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    infos: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    for i in range(images):
        image = np.full((height, width, 3), 30, np.uint8)
        for k in range(int(rng.integers(1, 4))):
            cat = 7 if k % 2 == 0 else 3
            w, h = (int(v) for v in rng.integers(8, 18, 2))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            mask = np.zeros((height, width), np.uint8)
            mask[y : y + h, x : x + w] = 1
            image[mask.astype(bool)] = (230, 20, 20) if cat == 7 else (20, 230, 20)
            polygon = [[x, y, x + w, y, x + w, y + h, x, y + h]]
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": 100 + i,
                    "category_id": cat,
                    "bbox": [x, y, w, h],
                    "area": float(w * h),
                    "iscrowd": 0,
                    "segmentation": encode_mask(mask) if k == 0 else polygon,
                }
            )
        write_png(folder / f"im{i}.png", image)
        infos.append({"id": 100 + i, "file_name": f"im{i}.png", "height": height, "width": width})
    crowd = np.zeros((height, width), np.uint8)
    crowd[:6, :6] = 1
    anns.append(
        {
            "id": len(anns) + 1,
            "image_id": 100,
            "category_id": 7,
            "bbox": [0, 0, 6, 6],
            "area": 36.0,
            "iscrowd": 1,
            "segmentation": encode_mask(crowd),
        }
    )
    path = folder / "annotations.json"
    cats = [{"id": 7, "name": "red"}, {"id": 3, "name": "green"}]
    path.write_text(json.dumps({"images": infos, "annotations": anns, "categories": cats}))
    return path
