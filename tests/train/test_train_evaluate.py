"""COCO AP with faster-coco-eval: ground truth against itself, empty, shifted."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from streamseg.train.data import (
    CocoDataset,
    GroundTruth,
    UnionDataset,
    decode_segmentation,
    encode_mask,
)
from streamseg.train.datasets import open_dataset, resolve_class_names
from streamseg.train.evaluate import _gt_dict, coco_evaluate

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


SCENE = "synthetic://?seed=5&width=96&height=64&objects=5"


def _as_detections(gts: list[GroundTruth], score: float = 0.9) -> list[dict[str, Any]]:
    """Every non-crowd ground-truth instance as a detection (box + RLE mask)."""
    return [
        {
            "image_id": gt.image_id,
            "category_id": ann["category_id"],
            "bbox": list(ann["bbox"]),
            "score": score,
            "segmentation": ann["segmentation"],
        }
        for gt in gts
        for ann in gt.annotations
        if not ann["iscrowd"]
    ]


def _synthetic(frames: int = 6) -> tuple[UnionDataset, tuple[str, ...]]:
    ds = open_dataset(f"{SCENE}&frames={frames}&stride=3")
    names = resolve_class_names(None, ds)
    ds.set_class_names(names)
    return ds, names


def test_synthetic_ground_truth_against_itself_is_one_and_empty_is_zero() -> None:
    ds, names = _synthetic()
    assert names == ("__background__", "disc", "square", "triangle", "star")
    gts = [ds.ground_truth(i) for i in range(len(ds))]
    assert sum(len(g.annotations) for g in gts) >= 12
    perfect = coco_evaluate(gts, _as_detections(gts), names)
    empty = coco_evaluate(gts, [], names)
    for kind in ("bbox", "segm"):
        assert perfect[kind]["AP"] == 1.0 == perfect[kind]["AP50"] == perfect[kind]["AP75"]
        assert empty[kind]["AP"] == 0.0 == empty[kind]["AP50"] == empty[kind]["AP75"]
    assert perfect["detections"] == perfect["instances"] and empty["detections"] == 0


def test_exported_synthetic_coco_scores_one_against_the_generator(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """`streamseg synth --png` writes a COCO dataset; its ground truth is the generator's."""
    proc = cli(
        "synth", "--out", str(tmp_path / "s"), "--seed", "5", "--size", "64x96",
        "--objects", "5", "--frames", "4", "--png", "--no-video",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    coco = CocoDataset(tmp_path / "s" / "annotations.json")
    generated = open_dataset(f"{SCENE}&frames=4")
    names = resolve_class_names(None, generated)
    generated.set_class_names(names)
    coco.set_class_names(names)
    assert len(coco) == 4
    for i in range(4):
        a, b = coco[i], generated[i]
        assert torch.equal(a.image, b.image) and torch.equal(a.masks, b.masks)
        assert torch.equal(a.labels, b.labels) and torch.equal(a.boxes, b.boxes)
    # Detections made from the generator, scored against the exported file.
    gts = [coco.ground_truth(i) for i in range(4)]
    dets = _as_detections([generated.ground_truth(i) for i in range(4)])
    for det, gt in zip(dets, (g for g in gts for a in g.annotations), strict=True):
        det["image_id"] = gt.image_id  # the file's ids start at 1
    result = coco_evaluate(gts, dets, names)
    assert result["bbox"]["AP"] == 1.0 and result["segm"]["AP"] == 1.0


def test_faster_coco_eval_agrees_with_pycocotools() -> None:
    """Noisy detections (shifted, eroded, false positives): both libraries give the same AP."""
    import pycocotools.cocoeval as pycoco
    from pycocotools.coco import COCO

    ds, names = _synthetic(frames=8)
    gts = [ds.ground_truth(i) for i in range(len(ds))]
    rng = np.random.default_rng(0)
    dets = []
    for det in _as_detections(gts):
        mask = decode_segmentation(det["segmentation"], 64, 96)
        dx = int(rng.integers(-3, 4))
        mask = np.roll(mask, dx, axis=1)
        x, y, w, h = det["bbox"]
        dets.append(
            {**det, "bbox": [x + dx, y, w, h], "segmentation": encode_mask(mask),
             "score": float(rng.uniform(0.1, 1.0)),
             "category_id": det["category_id"] if rng.uniform() > 0.15 else 1}
        )  # fmt: skip
    ours = coco_evaluate(gts, dets, names)
    assert 0.1 < ours["segm"]["AP"] < 0.95
    coco_gt = COCO()
    coco_gt.dataset = _gt_dict(gts, names)
    coco_gt.createIndex()
    coco_dt = coco_gt.loadRes([dict(d) for d in dets])
    for kind in ("bbox", "segm"):
        ev = pycoco.COCOeval(coco_gt, coco_dt, iouType=kind)
        ev.evaluate()
        ev.accumulate()
        with contextlib.redirect_stdout(io.StringIO()):
            ev.summarize()
        for k, name in enumerate(("AP", "AP50", "AP75")):
            assert ours[kind][name] == pytest.approx(float(ev.stats[k]), abs=1e-4), (kind, name)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("nope/annotations.json", "nope/annotations.json"),
        ("synthetic://?seed=1&colour=red", "unknown parameter 'colour'"),
        ("synthetic://?seed=1&frames=0", "frames and stride must be >= 1"),
    ],
)
def test_eval_command_names_a_bad_dataset(cli, data: str, message: str) -> None:  # type: ignore[no-untyped-def]
    proc = cli("eval", "--weights", "models/none.pth", "--data", data)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_command_names_a_bad_checkpoint(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = cli("eval", "--weights", str(tmp_path / "x.pth"), "--data", f"{SCENE}&frames=1")
    assert proc.returncode == 2 and f"checkpoint {tmp_path / 'x.pth'} does not exist" in proc.stderr
    (tmp_path / "bad.pth").write_bytes(b"not a checkpoint")
    proc = cli("eval", "--weights", str(tmp_path / "bad.pth"), "--data", f"{SCENE}&frames=1")
    assert proc.returncode == 2 and "could not be read" in proc.stderr
    assert "Traceback" not in proc.stderr
