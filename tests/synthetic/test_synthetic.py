"""SyntheticScene: determinism, random access, exact ground truth, identities."""

from __future__ import annotations

import math

import pytest
import torch

from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES, SceneFrame, SyntheticScene
from streamseg.types import Frame

H, W = 96, 128


def assert_same_frame(a: SceneFrame, b: SceneFrame) -> None:
    assert a.index == b.index and a.time == b.time
    assert torch.equal(a.image, b.image)
    for name in ("boxes", "labels", "scores", "masks", "track_ids"):
        assert torch.equal(getattr(a.gt, name), getattr(b.gt, name)), name
    assert torch.equal(a.visibility, b.visibility)


def test_same_seed_same_video_other_seed_other_video() -> None:
    a = SyntheticScene(seed=5, height=H, width=W)
    b = SyntheticScene(seed=5, height=H, width=W)
    c = SyntheticScene(seed=6, height=H, width=W)
    for i in (0, 7, 60):
        assert_same_frame(a.frame(i), b.frame(i))
        assert not torch.equal(a.frame(i).image, c.frame(i).image)


def test_random_access_equals_sequential_across_lives() -> None:
    # 2 fps over 150 s: every slot goes through several lives.
    seq = SyntheticScene(seed=2, height=H, width=W, fps=2.0, num_frames=300)
    frames = list(seq)
    assert len(frames) == 300 and [f.index for f in frames[:3]] == [0, 1, 2]
    direct = SyntheticScene(seed=2, height=H, width=W, fps=2.0, num_frames=300)
    for i in [299, 5, 150, 0, 77, 298, 151]:
        assert_same_frame(direct.frame(i), frames[i])
    ids = {int(t) for f in frames for t in f.gt.track_ids}
    assert max(ids) > 6 * 3, "objects should leave and new identities enter"


def test_frame_basics() -> None:
    scene = SyntheticScene(seed=1, height=H, width=W, fps=10.0, num_frames=20)
    f = scene.frame(3)
    assert f.time == pytest.approx(0.3)
    assert f.image.dtype == torch.uint8 and tuple(f.image.shape) == (H, W, 3)
    assert scene.class_names == SYNTHETIC_CLASS_NAMES
    assert SYNTHETIC_CLASS_NAMES == ("__background__", "disc", "square", "triangle", "star")
    assert len(scene) == 20
    with pytest.raises(IndexError):
        scene.frame(20)
    with pytest.raises(IndexError):
        scene.frame(-1)
    with pytest.raises(TypeError):
        len(SyntheticScene(height=H, width=W))
    frame = f.to_frame("cam1", capture_time=123.0)
    assert isinstance(frame, Frame) and frame.seq == 3 and frame.pts == f.time
    assert frame.capture_time == 123.0 and frame.image is f.image


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_gt_masks_disjoint_boxes_tight(seed: int) -> None:
    scene = SyntheticScene(seed=seed, height=H, width=W, num_objects=8)
    for i in range(0, 300, 23):
        gt = scene.frame(i).gt
        n = len(gt)
        assert gt.masks is not None and gt.track_ids is not None
        assert gt.masks.dtype == torch.bool and gt.boxes.dtype == torch.float32
        assert gt.labels.dtype == torch.int64 and gt.track_ids.dtype == torch.int64
        assert torch.equal(gt.scores, torch.ones(n))
        assert bool(((gt.labels >= 1) & (gt.labels <= 4)).all())
        assert len(set(gt.track_ids.tolist())) == n and bool((gt.track_ids >= 1).all())
        assert gt.track_ids.tolist() == sorted(gt.track_ids.tolist())
        assert int(gt.masks.sum(0).max()) <= 1, "visible masks overlap"
        for box, mask in zip(gt.boxes, gt.masks, strict=True):
            assert int(mask.sum()) >= scene.min_visible_pixels
            ys, xs = torch.nonzero(mask, as_tuple=True)
            expected = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
            assert box.tolist() == [float(v) for v in expected]


@pytest.mark.parametrize("seed", [0, 4])
def test_masks_are_exactly_the_pixels_each_object_paints(seed: int) -> None:
    """Hiding one object changes only its masked pixels, and objects behind it grow."""
    scene = SyntheticScene(seed=seed, height=H, width=W, num_objects=8)
    checked = 0
    for i in range(0, 200, 37):
        full = scene.frame(i)
        for k, tid in enumerate(full.gt.track_ids.tolist()):
            hidden = scene.frame(i, hide={tid})
            assert tid not in hidden.gt.track_ids.tolist()
            changed = (full.image != hidden.image).any(dim=2)
            mask = full.gt.masks[k]
            assert not bool((changed & ~mask).any()), "pixels changed outside the mask"
            # A pixel may keep its value by chance (object colour == what is behind).
            assert int((changed & mask).sum()) >= 0.9 * int(mask.sum())
            for j, other in enumerate(hidden.gt.track_ids.tolist()):
                if other in full.gt.track_ids.tolist():
                    before = full.gt.masks[full.gt.track_ids.tolist().index(other)]
                    assert bool((hidden.gt.masks[j] | ~before).all()), "a mask shrank"
            checked += 1
    assert checked >= 10


def test_identities_persist_and_move_smoothly() -> None:
    scene = SyntheticScene(seed=7, height=H, width=W, fps=15.0)
    label_of: dict[int, int] = {}
    last_box: dict[int, torch.Tensor] = {}
    first = scene.frame(0).gt.track_ids.tolist()
    assert set(first) <= set(range(1, scene.num_objects + 1))
    for i in range(0, 150):
        gt = scene.frame(i).gt
        for tid, label, box, vis in zip(
            gt.track_ids.tolist(),
            gt.labels.tolist(),
            gt.boxes,
            scene.frame(i).visibility,
            strict=True,
        ):
            assert label_of.setdefault(tid, label) == label, "an identity changed class"
            if tid in last_box and float(vis) == 1.0:
                # Centre moves at most ~0.1 frame width per frame at 15 fps.
                step = (box[:2] + box[2:]) / 2 - (last_box[tid][:2] + last_box[tid][2:]) / 2
                assert float(step.abs().max()) < 0.15 * W
            last_box[tid] = box


def test_visibility_fractions() -> None:
    scene = SyntheticScene(seed=3, height=H, width=W, num_objects=8)
    seen_partial = False
    for i in range(0, 300, 10):
        f = scene.frame(i)
        assert f.visibility.shape == (len(f.gt),) and f.visibility.dtype == torch.float32
        assert bool(((f.visibility > 0) & (f.visibility <= 1)).all())
        seen_partial |= bool((f.visibility < 0.9).any())
    assert seen_partial


def test_same_scene_at_any_resolution_and_fps() -> None:
    small = SyntheticScene(seed=9, height=H, width=W, fps=10.0)
    big = SyntheticScene(seed=9, height=2 * H, width=2 * W, fps=20.0)
    for i in (0, 13, 140):
        ps, pb = small.placements(i), big.placements(2 * i)
        assert [p.track_id for p in ps] == [p.track_id for p in pb]
        for a, b in zip(ps, pb, strict=True):
            assert b.cx == pytest.approx(2 * a.cx) and b.cy == pytest.approx(2 * a.cy)
            assert b.width == pytest.approx(2 * a.width) and b.scale == pytest.approx(a.scale)
        # The pictures agree too: downscaled big frame ~ small frame.
        img_b = big.frame(2 * i).image.float().reshape(H, 2, W, 2, 3).mean((1, 3))
        diff = (img_b - small.frame(i).image.float()).abs().mean()
        assert float(diff) < 12.0


def test_noise_and_shake_options() -> None:
    still = SyntheticScene(seed=1, height=H, width=W, num_objects=0, noise=0)
    assert torch.equal(still.frame(0).image, still.frame(9).image)
    noisy = SyntheticScene(seed=1, height=H, width=W, num_objects=0, noise=3)
    d = noisy.frame(0).image.int() - still.frame(0).image.int()
    assert int(d.abs().max()) <= 3 and float(d.float().std()) > 0.5
    assert not torch.equal(noisy.frame(0).image, noisy.frame(1).image)
    shaky = SyntheticScene(seed=1, height=H, width=W, num_objects=0, noise=0, shake=0.05)
    assert not torch.equal(shaky.frame(0).image, shaky.frame(4).image)
    for bad in ({"noise": 9}, {"shake": 0.5}, {"fps": 0.0}, {"height": 4}, {"num_frames": 0}):
        with pytest.raises(ValueError):
            SyntheticScene(**bad)  # type: ignore[arg-type]


def test_speed_is_resolution_independent_in_motion() -> None:
    """Motion is per second: at 4x the fps an object moves a quarter as far per frame."""
    slow = SyntheticScene(seed=11, height=H, width=W, fps=5.0)
    fast = SyntheticScene(seed=11, height=H, width=W, fps=20.0)
    a0, a1 = slow.placements(10), slow.placements(11)
    b0, b1 = fast.placements(40), fast.placements(44)
    assert [p.cx for p in a1] == pytest.approx([p.cx for p in b1])
    assert [math.hypot(p.cx - q.cx, p.cy - q.cy) for p, q in zip(a0, a1, strict=False)] == (
        pytest.approx([math.hypot(p.cx - q.cx, p.cy - q.cy) for p, q in zip(b0, b1, strict=False)])
    )
