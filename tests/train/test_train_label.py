"""``streamseg label``: a teacher over recorded footage -> a COCO dataset that loads and trains."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

from streamseg.models.checkpoint import save_checkpoint
from streamseg.models.trained import load_trained_model
from streamseg.synthetic.scene import ObjectSpec, SyntheticScene
from streamseg.track.config import TrackingConfig
from streamseg.train.data import CocoDataset, decode_segmentation
from streamseg.train.datasets import resolve_class_names
from streamseg.train.engine import run_training
from streamseg.train.label import (
    LabelOptions,
    LabelResult,
    LabelTracker,
    confirmed,
    label_tracking,
    label_videos,
    sample_frames,
)
from streamseg.types import Instances
from tests.support.checkpoints import SMALL_INPUT
from tests.support.coco import write_coco
from tests.support.training import losses, tiny_config

NAMES = ("__background__", "disc", "square", "triangle", "star")
OPTIONS = {**SMALL_INPUT, "detections_per_image": 8}


@pytest.fixture(scope="module")
def footage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded camera: 12 frames of a synthetic scene, H.264 at 10 fps, 64x96."""
    from streamseg.synthetic.export import write_scene
    from streamseg.synthetic.scene import SyntheticScene

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


def _by_track(result: LabelResult) -> dict[int, list[tuple[Any, ...]]]:
    """Annotations by track id, each as (image, category, bbox, score)."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for a in json.loads(result.annotations.read_text())["annotations"]:
        key = (a["image_id"], a["category_id"], tuple(a["bbox"]), a["score"])
        out.setdefault(a["track_id"], []).append(key)
    return out


def test_sampling_and_track_confirmation(
    cli,
    footage: Path,
    teacher: Path,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    every = _label(footage, teacher, tmp_path / "a", fps=5.0)
    assert every.images == 6  # 12 frames at 10 fps, 5 per second
    loose = _label(footage, teacher, tmp_path / "b2", fps=5.0, min_track_frames=2)
    strict = _label(footage, teacher, tmp_path / "b", fps=5.0, min_track_frames=3)
    assert loose.images == strict.images == 6
    # Tracking only removes: what it keeps plus what it dropped is the unfiltered set.
    for run in (loose, strict):
        assert run.instances + run.dropped_unconfirmed == every.instances
    # The teacher (random weights, every score kept) is partly steady, partly not.
    assert strict.instances > 0 and strict.dropped_unconfirmed > 0
    # The right ones: the tracker is deterministic, so the tracks kept with K=3 are
    # exactly those of the K=2 run seen in 3 or more frames, one instance per frame.
    tracks2, tracks3 = _by_track(loose), _by_track(strict)
    assert all(t >= 0 and len({k[0] for k in v}) == len(v) for t, v in tracks2.items())
    assert all(len(v) >= 2 for v in tracks2.values())
    assert tracks3 == {t: v for t, v in tracks2.items() if len(v) >= 3}
    only = _label(footage, teacher, tmp_path / "c", every=4, classes=("disc",))
    data = json.loads(only.annotations.read_text())
    assert [c["name"] for c in data["categories"]] == ["disc"] and only.images == 3
    assert {a["category_id"] for a in data["annotations"]} <= {1}
    bad = cli("label", str(footage), "--weights", str(teacher), "--out", str(tmp_path / "d"),
              "--classes", "forklift")  # fmt: skip
    assert bad.returncode == 2 and "the teacher has no class ['forklift']" in bad.stderr
    typo = cli("label", str(footage), "--weights", str(teacher), "--out", str(tmp_path / "e"),
               "--min-track-frames", "3", "--tracking", "match_iuo=0.1")  # fmt: skip
    assert typo.returncode == 2 and "match_iuo" in typo.stderr, typo.stderr


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


def _scripted_scene() -> SyntheticScene:
    """2.4 s at 10 fps, 96x160: a disc crossing the frame, a square standing
    still, and a triangle that only appears for the last 0.4 s."""
    objects = [
        ObjectSpec("disc", (24, 24), [(0.0, 20, 24), (2.4, 140, 24)], track_id=1),
        ObjectSpec("square", (20, 20), [(0.0, 40, 70)], track_id=2),
        ObjectSpec("triangle", (20, 20), [(0.0, 120, 70)], appear=2.0, track_id=3),
    ]
    return SyntheticScene(seed=5, height=96, width=160, fps=10, objects=objects, num_frames=24)


def _flicker(size: tuple[int, int], box: tuple[int, int, int, int], label: int) -> Instances:
    """One teacher false positive: a box and its filled mask."""
    x1, y1, x2, y2 = box
    masks = torch.zeros((1, *size), dtype=torch.bool)
    masks[0, y1:y2, x1:x2] = True
    return Instances(
        image_size=size,
        boxes=torch.tensor([box], dtype=torch.float32),
        scores=torch.tensor([0.4]),
        labels=torch.tensor([label]),
        masks=masks,
    )


def test_tracks_over_several_sampled_frames_are_kept_flickers_dropped() -> None:
    """The confirmation rule on the ground truth of a scripted scene, seen as a
    teacher would: every other frame, scores 0.35 (above --score-threshold 0.3
    but below the service tracker's thresholds), one missed detection, and
    one-frame false positives."""
    scene = _scripted_scene()
    size = scene.size
    extra = {  # sampled frame -> false positive of that frame only
        3: _flicker(size, (70, 70, 84, 86), 2),  # in empty floor
        5: _flicker(size, (33, 63, 51, 79), 2),  # a second box on the square
        8: _flicker(size, (60, 40, 74, 54), 4),
    }
    frames: list[tuple[float, Instances, Tensor]] = []  # time, teacher output, true identity
    for k, index in enumerate(range(0, 24, 2)):
        f = scene.frame(index)
        gt = f.gt.replace(scores=torch.full((len(f.gt),), 0.35), track_ids=None)
        identity = f.gt.track_ids
        assert identity is not None
        if k == 6:  # the teacher misses the disc once
            gt, identity = gt[identity != 1], identity[identity != 1]
        if k in extra:
            gt = Instances.cat([gt, extra[k]])
            identity = torch.cat([identity, torch.tensor([0])])  # 0: no object
        frames.append((f.time, gt, identity))
    options = LabelOptions(score_threshold=0.3, min_track_frames=3)
    tracker = LabelTracker(NAMES, label_tracking(options))
    ids = [tracker(k, t, inst) for k, (t, inst, _) in enumerate(frames)]
    tracker.close()
    keep = confirmed(ids, options.min_track_frames)
    for k, (_, _, identity) in enumerate(frames):
        # The disc (11 sampled frames, through the miss) and the square (12)
        # are kept; the triangle (2 sampled frames) and the flickers are not.
        assert keep[k].tolist() == [int(i) in (1, 2) for i in identity], k
    for obj in (1, 2):  # one track per object, from its first frame on
        tracks = {int(t) for f, (_, _, idn) in zip(ids, frames, strict=True) for t in f[idn == obj]}
        assert len(tracks) == 1 and min(tracks) >= 0, obj
    # With the service's tracker settings, no instance scoring 0.35 starts a track.
    service = LabelTracker(NAMES, TrackingConfig())
    assert all(bool((service(k, t, inst) == -1).all()) for k, (t, inst, _) in enumerate(frames))


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, {"high_score": 0.3, "low_score": 0.3, "new_track_score": 0.3, "confirm_hits": 1}),
        ({"high_score": 0.7}, {"high_score": 0.7, "low_score": 0.3, "new_track_score": 0.7}),
        ({"match_iou": 0.1, "match": "mask_iou"}, {"match_iou": 0.1, "match": "mask_iou"}),
        ({"max_lost_frames": 5}, {"max_lost_frames": 5, "publish_tentative": True}),
    ],
)
def test_label_tracking_settings(settings: dict[str, Any], expected: dict[str, Any]) -> None:
    cfg = label_tracking(LabelOptions(score_threshold=0.3, min_track_frames=3, tracking=settings))
    assert {k: getattr(cfg, k) for k in expected} == expected


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"enabled": False}, "tracking setting enabled cannot be changed"),
        ({"publish_tentative": False}, "tracking setting publish_tentative cannot be changed"),
        ({"match_iuo": 0.1}, "match_iuo"),
        ({"new_track_score": 0.1}, "new_track_score (0.1) must be >= high_score"),
    ],
)
def test_bad_label_tracking_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        label_tracking(LabelOptions(score_threshold=0.3, tracking=settings))
