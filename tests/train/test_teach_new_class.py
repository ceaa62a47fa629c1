"""scripts/teach_new_class.py, short: new footage with a fifth class, the demo model
labels the old ones, hand labels the new one, train merges both and keeps the old
classes' rows, eval compares. A few iterations only: the plumbing, not the AP (the real
run's figures are in docs/training.md, "Teach it a new class")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import faster_coco_eval.core.mask as mask_api

from streamseg.models.checkpoint import checkpoint_meta
from streamseg.train.data import CocoDataset, segmentation_to_rle
from tests.support.servers import cli_env

REPO = Path(__file__).resolve().parents[2]
OLD = ["disc", "square", "triangle", "star"]


Label = tuple[str, str, tuple[float, ...]]  # (frame file, class, box)


def _key(ann: dict[str, Any], image: dict[str, Any], cls: str) -> Label:
    return (Path(image["file_name"]).name, cls, tuple(round(v, 2) for v in ann["bbox"]))


def _labels(path: Path) -> list[tuple[Label, dict[str, Any]]]:
    """A label file's instances: (frame, class, box) and the annotation."""
    data = json.loads(path.read_text())
    images = {i["id"]: i for i in data["images"]}
    names = {c["id"]: c["name"] for c in data["categories"]}
    return [
        (_key(a, images[a["image_id"]], names[a["category_id"]]), a) for a in data["annotations"]
    ]


def _overlaps_hand(ann: dict[str, Any], hand: list[dict[str, Any]]) -> bool:
    h, w = ann["segmentation"]["size"]
    ours = [segmentation_to_rle(ann["segmentation"], h, w)]
    theirs = [segmentation_to_rle(a["segmentation"], h, w) for a in hand]
    return bool(theirs) and bool((mask_api.iou(ours, theirs, [0] * len(theirs)) >= 0.5).any())


def test_teach_a_new_class_end_to_end(tmp_path: Path) -> None:
    work = tmp_path / "teach"
    done = subprocess.run(
        [sys.executable, "scripts/teach_new_class.py", "--work", str(work), "--iterations", "2",
         "--footage-seeds", "201", "--footage-frames", "12", "--every", "4", "--eval-frames", "1"],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)

    # Classes kept and added, in the log and in the new checkpoint.
    assert result["classes"] == {"kept": OLD, "added": ["hexagon"], "dropped": []}
    log = (work / "train.log").read_text()
    assert "classes kept (4): disc, square, triangle, star; added (1): hexagon; dropped (0)" in log
    meta = checkpoint_meta(work / "run" / "model_final.pth")
    assert meta["class_names"] == ["__background__", *OLD, "hexagon"]

    # Teacher labels merged with the hand labels: every hand label is in the training
    # data, and every teacher label too unless it covers a hand-labelled hexagon.
    labels = work / "labels"
    teacher, hand = _labels(labels / "annotations.json"), _labels(labels / "hand.json")
    assert {k[1] for k, _ in teacher} <= set(OLD) and len(teacher) > 0
    assert {k[1] for k, _ in hand} == {"hexagon"}
    assert len(hand) == result["labels"]["hand_instances"]
    assert len(teacher) == result["labels"]["teacher_instances"]
    hand_on: dict[str, list[dict[str, Any]]] = {}  # frame -> its hand annotations
    for key, ann in hand:
        hand_on.setdefault(key[0], []).append(ann)
    kept_teacher = [k for k, a in teacher if not _overlaps_hand(a, hand_on.get(k[0], []))]
    covered = len(teacher) - len(kept_teacher)
    train = json.loads((work / "train.yaml").read_text())["data"]["train"]
    merged = CocoDataset(train[0]["annotations"], train[0]["images"])
    merged.set_class_names(meta["class_names"])
    seen = []
    for i in range(len(merged)):
        gt = merged.ground_truth(i)
        image = merged._images[i]
        seen += [_key(a, image, meta["class_names"][a["category_id"]]) for a in gt.annotations]
    assert sorted(seen) == sorted([k for k, _ in hand] + kept_teacher)
    assert f"left out {covered} annotations" in log

    # The figures are there (their values mean nothing after 2 iterations).
    assert 0.0 <= result["new_class_ap"]["segm"] <= 1.0
    assert result["new_class_ap"]["instances"] > 0
    assert set(result["old_classes_ap"]["before"]) == {"bbox", "segm"}
    assert result["train"]["iterations"] == 2 and result["train"]["cpu_s"] > 0
    assert json.loads((work / "result.json").read_text()) == result
