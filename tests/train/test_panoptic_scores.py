"""PQ (torchmetrics) and mIoU against a case computed by hand, and the synthetic panoptic truth."""

from __future__ import annotations

import pytest
import torch

from streamseg.train.data import SyntheticDataset
from streamseg.train.panoptic import SegmentationScores, prediction_segments
from streamseg.types import Instances, Regions

STUFF_SCENE = "synthetic://?seed=2001&width=96&height=64&objects=3&stuff=1"


def _hand_case() -> tuple[Instances, torch.Tensor]:
    """4x8 frame. Truth: stuff 3 on the left, stuff 4 on the right, thing A (class 1) in
    each half. Prediction: A a bit too wide, B missed (painted as stuff 4), a false thing
    of class 2 on stuff 4."""
    truth = torch.zeros((4, 8, 2), dtype=torch.int64)
    truth[:, :4, 0], truth[:, 4:, 0] = 3, 4
    truth[1:3, 1:3] = torch.tensor([1, 1])  # A
    truth[1:3, 5:7] = torch.tensor([1, 2])  # B
    stuff = torch.zeros((4, 8), dtype=torch.int64)
    stuff[:, :4], stuff[:, 4:] = 3, 4
    wide_a = torch.zeros((4, 8), dtype=torch.bool)
    wide_a[1:3, 1:4] = True
    false_thing = torch.zeros((4, 8), dtype=torch.bool)
    false_thing[0, 6:8] = True
    stuff[wide_a | false_thing] = 0
    pred = Instances(
        image_size=(4, 8),
        boxes=torch.tensor([[1.0, 1, 4, 3], [6, 0, 8, 1]]),
        scores=torch.tensor([0.9, 0.8]),
        labels=torch.tensor([1, 2]),
        masks=torch.stack([wide_a, false_thing]),
        regions=Regions.from_label_map(stuff),
    )
    return pred, truth


def test_pq_and_miou_of_a_hand_computed_case() -> None:
    pred, truth = _hand_case()
    scores = SegmentationScores(5, stuff={3, 4})
    scores.add(pred, truth)
    got = scores.result()
    # Per class (PQ = sum of matched IoUs / (TP + FP/2 + FN/2)):
    #   1: A matched, IoU 4/6, B missed      -> (2/3) / 1.5 = 0.4444 (SQ 2/3, RQ 2/3)
    #   2: one false positive               -> 0
    #   3: IoU 10/12                         -> 0.8333
    #   4: IoU 10/16 (12 true, 14 predicted) -> 0.625
    pq = {1: (2 / 3) / 1.5, 2: 0.0, 3: 10 / 12, 4: 10 / 16}
    assert got["panoptic"]["PQ"] == pytest.approx(sum(pq.values()) / 4, abs=1e-6)
    assert got["panoptic"]["PQ_th"] == pytest.approx((pq[1] + pq[2]) / 2, abs=1e-6)
    assert got["panoptic"]["PQ_st"] == pytest.approx((pq[3] + pq[4]) / 2, abs=1e-6)
    assert got["panoptic"]["RQ_th"] == pytest.approx((2 / 3 + 0) / 2, abs=1e-6)
    # Pixels: IoU 4/10, 0/2, 10/12, 10/16; 24 of 32 right.
    miou = (0.4 + 0.0 + 10 / 12 + 10 / 16) / 4
    assert got["sem_seg"]["mIoU"] == pytest.approx(miou, abs=1e-6)
    assert got["sem_seg"]["pixel_accuracy"] == pytest.approx(24 / 32)


def test_an_empty_prediction_scores_zero_not_nothing() -> None:
    _, truth = _hand_case()
    scores = SegmentationScores(5, stuff={3, 4})
    scores.add(Instances.empty((4, 8)), truth)
    got = scores.result()
    assert got["panoptic"]["PQ"] == 0.0 and got["panoptic"]["PQ_st"] == 0.0
    assert got["sem_seg"]["mIoU"] == 0.0


def test_prediction_segments_number_instances_and_keep_regions() -> None:
    pred, _ = _hand_case()
    seg = prediction_segments(pred)
    assert seg[1, 3].tolist() == [1, 1] and seg[0, 7].tolist() == [2, 2]
    assert seg[0, 0].tolist() == [3, 0] and seg[3, 7].tolist() == [4, 0]


def test_synthetic_panoptic_truth_and_training_targets() -> None:
    data = SyntheticDataset(STUFF_SCENE, frames=2)
    names = ("__background__", *data.native_class_names)
    assert names[-3:] == ("ground", "road", "water")
    data.set_class_names(names)
    assert data.stuff_labels() == {5, 6, 7}
    sample = data[0]
    truth = data.ground_truth(0)
    assert truth.segments is not None
    # The targets: the things, then one segment per stuff class present.
    n_things = len(truth.annotations)
    assert sample.labels[:n_things].max() <= 4 and bool((sample.labels[n_things:] >= 5).all())
    assert int(sample.masks.sum()) == int((truth.segments[..., 0] > 0).sum())
    # Things are numbered 1..N, stuff pixels carry no instance number.
    assert sorted(truth.segments[..., 1].unique().tolist()) == list(range(n_things + 1))
    assert not bool(((truth.segments[..., 0] >= 5) & (truth.segments[..., 1] > 0)).any())
    # A perfect prediction scores 1.
    pred = Instances(
        image_size=sample.size,
        boxes=sample.boxes[:n_things],
        scores=torch.ones(n_things),
        labels=sample.labels[:n_things],
        masks=sample.masks[:n_things],
        regions=Regions.from_label_map(
            torch.where(truth.segments[..., 0] >= 5, truth.segments[..., 0], 0)
        ),
    )
    scores = SegmentationScores(len(names), stuff=data.stuff_labels())
    scores.add(pred, truth.segments)
    assert scores.result()["panoptic"]["PQ"] == 1.0
    assert scores.result()["sem_seg"]["mIoU"] == 1.0
