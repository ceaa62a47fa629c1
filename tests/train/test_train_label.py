"""``streamseg label``: a teacher over recorded footage -> a COCO dataset that loads and trains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from streamseg.models.checkpoint import save_checkpoint
from streamseg.train.data import CocoDataset, decode_segmentation
from streamseg.train.datasets import resolve_class_names
from streamseg.train.engine import run_training
from streamseg.train.label import LabelOptions, LabelResult, label_videos, sample_frames
from streamseg.train.modeling import load_trained_model
from tests.support.coco import write_coco
from tests.support.training import losses, tiny_config

NAMES = ("__background__", "disc", "square", "triangle", "star")
OPTIONS = {"min_size": 64, "max_size": 96, "detections_per_image": 8}


@pytest.fixture(scope="module")
def footage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded camera: 12 frames of a synthetic scene, H.264 at 10 fps, 64x96."""
    from streamseg.ingest.synthetic import SyntheticScene
    from streamseg.ingest.synthetic_export import write_scene

    out = tmp_path_factory.mktemp("footage")
    scene = SyntheticScene.from_url("synthetic://?seed=4&width=96&height=64&fps=10&objects=3")
    write_scene(scene, out, num_frames=12, crf=10, preset="ultrafast", video_name="cam.mp4")
    return out / "cam.mp4"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """maskrcnn_small with random weights, saved as a streamseg checkpoint (formats only)."""
    from streamseg.models import build_model

    torch.manual_seed(0)
    model = build_model("maskrcnn_small", class_names=NAMES, **OPTIONS)
    path = tmp_path_factory.mktemp("teacher") / "teacher.pth"
    meta = {"arch": "maskrcnn_small", "class_names": list(NAMES), "model_options": OPTIONS}
    save_checkpoint(path, model.state_dict(), **meta)
    return path


def _label(footage: Path, teacher: Path, out: Path, **options: Any) -> LabelResult:
    model, names = load_trained_model(str(teacher), score_threshold=0.0)
    opts = LabelOptions(score_threshold=0.0, **options)
    return label_videos([footage], model=model, class_names=names, out_dir=out, options=opts)


def test_label_output_is_a_coco_dataset(cli, footage: Path, teacher: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "labels"
    args = ["label", str(footage.parent), "--weights", str(teacher), "--out", str(out)]
    proc = cli(*args, "--score-threshold", "0.0", "--every", "3")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["images"] == 4 and report["instances"] > 0
    assert report["videos"] == [str(footage)]
    data = json.loads((tmp_path / "labels" / "annotations.json").read_text())
    assert [c["name"] for c in data["categories"]] == list(NAMES[1:])
    assert [im["frame_index"] for im in data["images"]] == [0, 3, 6, 9]
    ds = CocoDataset(tmp_path / "labels" / "annotations.json")
    ds.set_class_names(resolve_class_names(None, ds))
    assert len(ds) == 4 and sum(len(ds[i]) for i in range(4)) == report["instances"]
    frames = {i: im for i, _, im in sample_frames(footage, every=3)}
    for i, info in enumerate(data["images"]):
        sample = ds[i]
        # Frames are stored losslessly: exactly what the decoder gave the teacher.
        assert torch.equal(sample.image, frames[info["frame_index"]])
    for ann in data["annotations"]:
        assert 0.0 <= ann["score"] <= 1.0 and ann["iscrowd"] == 0
        mask = decode_segmentation(ann["segmentation"], 64, 96)
        assert ann["area"] == float(mask.sum())
        x, y, w, h = ann["bbox"]
        assert 0 <= x <= x + w <= 96 and 0 <= y <= y + h <= 64


def test_sampling_and_track_confirmation(
    cli,
    footage: Path,
    teacher: Path,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    every = _label(footage, teacher, tmp_path / "a", fps=5.0)
    assert every.images == 6  # 12 frames at 10 fps, 5 per second
    strict = _label(footage, teacher, tmp_path / "b", fps=5.0, min_track_frames=3)
    assert strict.images == 6
    # Tracking only removes: what it keeps plus what it dropped is the unfiltered set.
    assert strict.instances + strict.dropped_unconfirmed == every.instances
    anns = json.loads(strict.annotations.read_text())["annotations"]
    per_track: dict[int, int] = {}
    for ann in anns:
        per_track[ann["track_id"]] = per_track.get(ann["track_id"], 0) + 1
    assert all(track >= 0 and n >= 3 for track, n in per_track.items())
    only = _label(footage, teacher, tmp_path / "c", every=4, classes=("disc",))
    data = json.loads(only.annotations.read_text())
    assert [c["name"] for c in data["categories"]] == ["disc"] and only.images == 3
    assert {a["category_id"] for a in data["annotations"]} <= {1}
    bad = cli("label", str(footage), "--weights", str(teacher), "--out", str(tmp_path / "d"),
              "--classes", "forklift")  # fmt: skip
    assert bad.returncode == 2 and "the teacher has no class ['forklift']" in bad.stderr


def test_label_output_and_human_coco_train_together(
    footage: Path, teacher: Path, tmp_path: Path
) -> None:
    _label(footage, teacher, tmp_path / "labels", every=4)
    human = write_coco(tmp_path / "cvat", images=3)  # a CVAT-style export (ids 7 and 3)
    train = (
        f"    - annotations: {tmp_path / 'labels' / 'annotations.json'}\n"
        f"    - annotations: {human}\n"
        "      crowd_as_instances: true\n"
    )
    cfg = tiny_config(tmp_path, "mixed", train=train, solver__iterations=3)
    run_training(cfg, install_signals=False)
    rows = losses(Path(cfg.output.dir))
    assert len(rows) == 3 and all(np.isfinite(r["loss"]) for r in rows)
    saved = json.loads((Path(cfg.output.dir) / "config.json").read_text())
    assert len(saved["data"]["train"]) == 2
