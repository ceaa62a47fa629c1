"""Hand labels of a new class and teacher labels of the old ones, over the same frames,
read as one dataset: images matched by file name, the hand label wins where both
labelled one object, and no other label of either file is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamseg.synthetic.export import write_scene
from streamseg.synthetic.scene import SyntheticScene
from streamseg.train.config import DatasetConfig
from streamseg.train.data import CocoDataset, DatasetError
from streamseg.train.datasets import build_dataset

NAMES = ("__background__", "disc", "square", "triangle", "star", "hexagon")


@pytest.fixture
def scene_dir(tmp_path: Path) -> Path:
    """8 frames of a 5-class scene with hexagons in them (PNG + exact COCO)."""
    scene = SyntheticScene.from_url("synthetic://?seed=4&width=160&height=120&objects=6&shapes=5")
    write_scene(scene, tmp_path, num_frames=8, video=False, frames_png=True)
    return tmp_path


def _split(scene_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hand, teacher): hexagons only, as an annotation tool exports them (base file
    names, its own ids); everything else, plus the teacher's mistake of calling every
    hexagon a disc."""
    truth = json.loads((scene_dir / "annotations.json").read_text())
    hexagons = [a for a in truth["annotations"] if a["category_id"] == 5]
    assert len(hexagons) >= 3
    hand = {
        "images": [{**i, "id": 500 + i["id"], "file_name": Path(i["file_name"]).name}
                   for i in truth["images"]],
        "annotations": [{**a, "image_id": 500 + a["image_id"], "category_id": 42}
                        for a in hexagons],
        "categories": [{"id": 42, "name": "hexagon"}],
    }  # fmt: skip
    teacher = {
        "images": truth["images"],
        "annotations": [a for a in truth["annotations"] if a["category_id"] != 5]
        + [{**a, "id": 1000 + a["id"], "category_id": 1} for a in hexagons],
        "categories": truth["categories"][:4],
    }
    return hand, teacher


def _write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def _objects(ds: CocoDataset) -> set[tuple[int, str, tuple[float, ...]]]:
    """Every instance as (frame, class, box)."""
    out = set()
    for i in range(len(ds)):
        frame = ds.ground_truth(i)
        for a in frame.annotations:
            out.add((i, NAMES[a["category_id"]], tuple(round(v, 3) for v in a["bbox"])))
    return out


def test_hand_labels_win_and_no_other_label_is_lost(scene_dir: Path) -> None:
    hand, teacher = _split(scene_dir)
    paths = [_write(scene_dir / "hand.json", hand), _write(scene_dir / "teacher.json", teacher)]
    cfg = DatasetConfig(annotations=paths)
    merged = build_dataset([cfg])
    merged.set_class_names(NAMES)
    truth = CocoDataset(scene_dir / "annotations.json")
    truth.set_class_names(NAMES)
    assert len(merged) == len(truth) == 8
    # Exactly the true objects: the teacher's discs on hexagons are gone, every
    # hexagon (hand) and every other object (teacher) is there, as the right class.
    assert _objects(merged.datasets[0]) == _objects(truth)  # type: ignore[arg-type]
    assert merged.native_class_names == ("hexagon", "disc", "square", "triangle", "star")
    sample, expected = merged[3], truth[3]
    assert sample.labels.tolist() == sorted(sample.labels.tolist(), key=lambda v: v != 5)
    assert sorted(sample.labels.tolist()) == sorted(expected.labels.tolist())


def test_teacher_first_keeps_its_discs_instead(scene_dir: Path) -> None:
    """The order is the trust: listed first, the teacher's wrong discs stay and the
    hand-labelled hexagons under them are left out."""
    hand, teacher = _split(scene_dir)
    paths = [_write(scene_dir / "teacher.json", teacher), _write(scene_dir / "hand.json", hand)]
    ds = CocoDataset(paths)
    ds.set_class_names(NAMES)
    classes = [c for _, c, _ in _objects(ds)]
    assert "hexagon" not in classes and classes.count("disc") > 0


def test_images_of_different_sizes_are_an_error(scene_dir: Path) -> None:
    hand, teacher = _split(scene_dir)
    hand["images"][0]["width"] = 999
    paths = [_write(scene_dir / "hand.json", hand), _write(scene_dir / "teacher.json", teacher)]
    with pytest.raises(
        DatasetError, match=r"is 160x120 but 000000\.png of an earlier file is 999x120"
    ):
        CocoDataset(paths)
