"""COCO AP with faster-coco-eval: ground truth against itself, empty, shifted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamseg.train.data import CocoDataset
from streamseg.train.evaluate import coco_evaluate

NAMES = ("__background__", "red", "green")


def _gt_as_detections(ds: CocoDataset, shift: float = 0.0) -> list[dict[str, Any]]:
    dets = []
    for i in range(len(ds)):
        gt = ds.ground_truth(i)
        for ann in gt.annotations:
            if ann["iscrowd"]:
                continue
            x, y, w, h = ann["bbox"]
            dets.append(
                {
                    "image_id": gt.image_id,
                    "category_id": ann["category_id"],
                    "bbox": [x + shift, y, w, h],
                    "score": 0.9,
                    "segmentation": ann["segmentation"],
                }
            )
    return dets


def test_ground_truth_scores_one_and_nothing_scores_zero(coco_dir: Path) -> None:
    ds = CocoDataset(coco_dir)
    ds.set_class_names(NAMES)
    gts = [ds.ground_truth(i) for i in range(len(ds))]
    perfect = coco_evaluate(gts, _gt_as_detections(ds), NAMES)
    for kind in ("bbox", "segm"):
        assert perfect[kind]["AP"] == 1.0
        assert perfect[kind]["AP50"] == 1.0 and perfect[kind]["AP75"] == 1.0
    empty = coco_evaluate(gts, [], NAMES)
    for kind in ("bbox", "segm"):
        assert empty[kind]["AP"] == 0.0 and empty[kind]["AP50"] == 0.0
    assert perfect["images"] == 4 and perfect["instances"] == empty["instances"] > 0


def test_shifted_boxes_lose_box_ap_only(coco_dir: Path) -> None:
    ds = CocoDataset(coco_dir)
    ds.set_class_names(NAMES)
    gts = [ds.ground_truth(i) for i in range(len(ds))]
    shifted = coco_evaluate(gts, _gt_as_detections(ds, shift=4.0), NAMES)
    assert 0.0 < shifted["bbox"]["AP"] < 1.0
    assert shifted["segm"]["AP"] == 1.0
