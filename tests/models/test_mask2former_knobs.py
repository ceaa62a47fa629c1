"""``scripts/m2f_knobs.py``: one forward pass, then the post-processing again per
setting; its figures must be what ``streamseg eval`` gives for the same setting,
and the knobs must act. ``scripts/m2f_merge_probe.py``: one verdict per true
thing. (docs/mask2former.md quotes both.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.models.trained import load_trained_model
from streamseg.train.data import UnionDataset
from streamseg.train.datasets import open_dataset
from streamseg.train.evaluate import evaluate_model
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = str(ROOT / "models" / "panoptic_tiny.pth")
URL = "synthetic://?seed=3001&width=256&height=192&objects=3&stuff=1&frames=3&stride=5"


def test_panoptic_sweep_matches_eval_and_the_threshold_acts() -> None:
    grid = [
        {"object_mask_threshold": 0.8, "overlap_threshold": 0.8},
        {"object_mask_threshold": 1.0, "overlap_threshold": 0.8},  # no query passes
    ]
    default, none = load_script("m2f_knobs").sweep(WEIGHTS, [URL], "panoptic", grid, batch_size=3)
    model, names = load_trained_model(WEIGHTS, task="panoptic")
    dataset = UnionDataset([open_dataset(URL, None)])
    dataset.set_class_names(names)
    reference = evaluate_model(model, dataset, names, batch_size=3)
    assert default["PQ"] == pytest.approx(reference["panoptic"]["PQ"], abs=1e-6)
    assert default["PQ_st"] == pytest.approx(reference["panoptic"]["PQ_st"], abs=1e-6)
    assert default["mask_AP"] == pytest.approx(reference["segm"]["AP"], abs=1e-6)
    assert default["PQ_st"] > 0.5  # the tiny model's stuff is learnt
    assert none["detections"] == 0 and none["PQ"] == 0.0


def test_instance_sweep_keeps_at_most_top_k() -> None:
    grid = [
        {"score_threshold": 0.0, "detections_per_image": 3},
        {"score_threshold": 0.0, "detections_per_image": 100},
    ]
    few, many = load_script("m2f_knobs").sweep(WEIGHTS, [URL], "instance", grid, batch_size=3)
    assert few["detections"] == 3 * 3  # 3 images
    assert many["detections"] > few["detections"]


def test_merge_probe_gives_every_true_thing_one_verdict() -> None:
    dataset = open_dataset(URL, None)
    model, names = load_trained_model(WEIGHTS, task="panoptic")
    dataset.set_class_names(names)
    things = 0
    for i in range(len(dataset)):
        segments = dataset.ground_truth(i).segments
        assert segments is not None
        for label, number in {tuple(v) for v in segments.flatten(0, 1).tolist()}:
            things += number > 0 and bool(model.is_thing[label - 1])
    out = load_script("m2f_merge_probe").probe(WEIGHTS, [URL])
    assert out["things"] == things > 0
    assert sum(out["share"].values()) == pytest.approx(1.0, abs=1e-3)
    strict = load_script("m2f_merge_probe").probe(
        WEIGHTS, [URL], object_mask_threshold=1.0
    )  # no query passes
    assert strict["things"] == things and "found" not in strict["share"]
    assert not any(k.startswith("dropped_by_merge") for k in strict["share"])
