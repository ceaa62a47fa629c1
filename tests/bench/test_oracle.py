"""``OracleSegmenter``: a frame's exact instances, found by camera and sequence number."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from streamseg.bench.oracle import FrameTruth, OracleSegmenter
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import FrameBatch


def test_each_frame_gets_its_own_ground_truth() -> None:
    scene = SyntheticScene(seed=4, height=40, width=56, num_objects=4, num_frames=5)
    oracle = OracleSegmenter.from_scene(scene, ["a", "b"], frames=5)
    frames = (scene.frame(3).to_frame("b"), scene.frame(0).to_frame("a"))
    out = oracle.segment(FrameBatch(frames))
    for got, index in zip(out, (3, 0), strict=True):
        gt = scene.frame(index).gt
        assert len(gt) > 0 and got.image_size == gt.image_size
        assert torch.equal(got.boxes, gt.boxes) and torch.equal(got.labels, gt.labels)
        assert got.masks is not None and torch.equal(got.frame_masks(), gt.masks)
        assert torch.equal(got.scores, torch.ones(len(gt))) and got.track_ids is None


def test_a_frame_without_truth_is_named() -> None:
    scene = SyntheticScene(seed=4, height=40, width=56, num_frames=5)
    oracle = OracleSegmenter.from_scene(scene, ["a"], frames=2)
    with pytest.raises(KeyError, match=r"camera 'a' frame 2 \(2 frames known\)"):
        oracle.segment(FrameBatch((scene.frame(2).to_frame("a"),)))
    with pytest.raises(KeyError, match="camera 'z' frame 0"):
        oracle.segment(FrameBatch((scene.frame(0).to_frame("z"),)))
    small = dataclasses.replace(
        scene.frame(1).to_frame("a"), image=torch.zeros((8, 8, 3), dtype=torch.uint8)
    )
    with pytest.raises(ValueError, match=r"is \(8, 8\), its ground truth \(40, 56\)"):
        oracle.segment(FrameBatch((small,)))


def test_truth_needs_masks() -> None:
    gt = SyntheticScene(seed=4, height=40, width=56, num_frames=1).frame(0).gt
    with pytest.raises(ValueError, match="masks"):
        FrameTruth.of(gt.replace(masks=None))
