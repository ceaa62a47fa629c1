"""The ByteTrack-style tracker: rounds, life cycle, occlusion, cameras, masks, labels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from streamseg.ops import box_iou as ops_box_iou
from streamseg.track.config import TrackingConfig
from streamseg.track.matching import assign, box_iou, mask_iou, overlap_pairs
from streamseg.track.tracker import ByteTracker
from streamseg.track.view import FrameInfo
from streamseg.types import TrackState
from tests.support.tracking import Driver, alerts, box_at, instances


def walk(x0: float, y: float, step: float, n: int, size: float = 20.0) -> list[list[float]]:
    return [[x0 + step * i, y, x0 + step * i + size, y + size] for i in range(n)]


def test_tentative_then_confirmed() -> None:
    d = Driver(confirm_hits=3)
    for expected in ([-1], [-1], [1], [1]):
        d.step([[10 + 2 * len(d.results), 10, 40 + 2 * len(d.results), 40]])
        assert d.ids() == expected
    (track,) = d.stage.tracks("cam")
    assert track.state == TrackState.CONFIRMED and track.hits == 4 and track.track_id == 1


def test_publish_tentative() -> None:
    d = Driver(confirm_hits=3, publish_tentative=True)
    d.step([[10, 10, 40, 40]])
    assert d.ids() == [1]


def test_unmatched_tentative_track_is_removed_and_ids_are_not_reused() -> None:
    d = Driver(confirm_hits=2)
    d.step([[10, 10, 40, 40]])  # tentative id 1
    d.step([])  # missed: removed at once
    assert d.stage.tracks("cam") == []
    d.step([[10, 10, 40, 40]])
    d.step([[10, 10, 40, 40]])
    assert d.ids() == [2]


def test_lost_then_removed_after_max_lost_seconds() -> None:
    d = Driver(max_lost_seconds=0.5)
    for _ in range(3):
        d.step([[10, 10, 40, 40]])
    d.step([])
    (track,) = d.stage.tracks("cam")
    assert track.state == TrackState.LOST
    for _ in range(4):  # t = 0.4 .. 0.7: up to 0.5 s after the last sighting at t = 0.2
        d.step([])
        assert len(d.stage.tracks("cam")) == 1
    d.step([])  # t = 0.8
    assert d.stage.tracks("cam") == []


def test_removed_tracks_reach_the_rules_once() -> None:
    tracker = ByteTracker(settings=TrackingConfig(max_lost_seconds=0.25), num_classes=2)
    box = np.array([[10.0, 10.0, 40.0, 40.0]])
    one, none = np.array([0.9]), np.zeros(0)
    removed = []
    for i in range(10):
        info = FrameInfo("cam", i * 0.1, i, None, (100, 200))
        if i < 3:
            out = tracker.update(info, box, one, np.array([1]))
        else:
            out = tracker.update(info, np.zeros((0, 4)), none, np.zeros(0, np.int64))
        removed.append(out.view.removed_ids.tolist())
    assert removed == [[], [], [], [], [], [1], [], [], [], []]
    assert out.view.removed_boxes.shape == (0, 4)


def test_max_lost_frames_cap() -> None:
    d = Driver(max_lost_seconds=100.0, max_lost_frames=2)
    for _ in range(2):
        d.step([[10, 10, 40, 40]])
    d.step([])
    d.step([])
    assert len(d.stage.tracks("cam")) == 1
    d.step([])
    assert d.stage.tracks("cam") == []


def test_low_score_detection_keeps_a_track_in_round_two() -> None:
    d = Driver(high_score=0.5, low_score=0.1, new_track_score=0.6)
    for i in range(3):
        d.step([[10 + i, 10, 40 + i, 40]], scores=[0.9])
    # The object is half hidden: the detector is unsure (0.3).
    for i in range(3, 6):
        d.step([[10 + i, 10, 40 + i, 40]], scores=[0.3])
        assert d.ids() == [1]
    (track,) = d.stage.tracks("cam")
    assert track.state == TrackState.CONFIRMED
    # A low score detection never starts a track; below low_score it is ignored.
    d.step([[10 + 6, 10, 46, 40], [150, 50, 180, 80], [100, 10, 130, 40]], scores=[0.9, 0.3, 0.05])
    d.step([[10 + 7, 10, 47, 40], [150, 50, 180, 80], [100, 10, 130, 40]], scores=[0.9, 0.3, 0.05])
    assert d.ids() == [1, -1, -1]
    assert len(d.stage.tracks("cam")) == 1


def test_low_score_round_needs_more_overlap() -> None:
    d = Driver(low_match_iou=0.5)
    for _i in range(3):
        d.step([[10, 10, 40, 40]])
    # IoU([10,10,40,40], [25,10,55,40]) = 1/3 < 0.5: not taken in round two.
    d.step([[25, 10, 55, 40]], scores=[0.3])
    assert d.ids() == [-1]
    assert d.stage.tracks("cam")[0].state == TrackState.LOST


def test_high_score_detections_are_matched_first() -> None:
    # A high and a low detection both overlap the track; the high one wins
    # even though the low one overlaps more.
    d = Driver()
    for _ in range(3):
        d.step([[10, 10, 40, 40]])
    d.step([[10, 10, 40, 40], [16, 10, 46, 40]], scores=[0.3, 0.9])
    assert d.ids() == [-1, 1]


def test_occlusion_keeps_the_id() -> None:
    # Two objects walk towards each other; B passes behind A and is not
    # detected for 5 frames (0.5 s), then reappears where its motion says.
    d = Driver(max_lost_seconds=1.0)
    a = walk(20, 40, 6, 20)
    b = walk(160, 40, -6, 20)
    paths: list[list[list[float] | None]] = [list(a), list(b)]
    for f in range(9, 14):
        paths[1][f] = None
    seen: list[list[int]] = []
    for f in range(20):
        boxes = [p[f] for p in paths if p[f] is not None]
        d.step(boxes)
        seen.append(d.ids())
    assert seen[5] == [1, 2] and seen[8] == [1, 2]
    assert all(s == [1] for s in seen[9:14])
    assert seen[14] == [1, 2] and seen[19] == [1, 2]


def test_motion_model_bridges_a_gap_without_overlap() -> None:
    # 20 px box moving 8 px/frame, undetected for 3 frames: the last box
    # and the new one do not overlap at all; the prediction does.
    d = Driver()
    path = walk(0, 40, 8, 12)
    for f in range(12):
        if 6 <= f < 9:
            d.skip(1)
            continue
        d.step([path[f]])
    assert d.ids() == [1]


def test_dropped_frames_are_a_longer_time_step() -> None:
    # 4 px/frame; after the motion is learnt, frames reach the tracker at
    # irregular gaps of up to 0.7 s (28 px, more than the box's size).
    d = Driver()
    path = walk(0, 40, 4, 40)
    shown = [0, 1, 2, 3, 4, 5, 12, 13, 17, 18, 25, 26, 27, 30, 37, 38]
    for f in range(40):
        if f in shown:
            d.step([path[f]])
            assert d.ids() == ([-1] if f == 0 else [1])
        else:
            d.skip(1)


def test_crossing_objects_keep_their_ids() -> None:
    d = Driver()
    a = walk(10, 30, 8, 20, size=24)
    b = walk(170, 36, -8, 20, size=24)
    for f in range(20):
        d.step([a[f], b[f]], scores=[0.9, 0.85])
    assert d.ids() == [1, 2]


def test_cameras_have_separate_state() -> None:
    d = Driver()
    for _i in range(3):
        d.step([[10, 10, 40, 40]], camera="a")
        d.seq -= 1
        d.step([[10, 10, 40, 40], [100, 10, 130, 40]], camera="b")
    assert d.ids() == [1, 2]
    d.step([[100, 10, 130, 40]], camera="a")  # not camera b's track 2
    d.step([[100, 10, 130, 40]], camera="a")
    assert d.ids() == [2]
    assert [t.track_id for t in d.stage.tracks("a")] == [1, 2]
    assert [t.camera_id for t in d.stage.tracks("b")] == ["b", "b"]
    assert d.stage.tracks("nowhere") == []


def test_frame_size_change_starts_afresh(caplog: pytest.LogCaptureFixture) -> None:
    d = Driver()
    for _ in range(2):
        d.step([[10, 10, 40, 40]])
    assert d.ids() == [1]
    d.size = (120, 200)
    d.step([[10, 10, 40, 40]])
    assert d.ids() == [-1]
    assert "frame size changed" in caplog.text


def diagonal_mask(flip: bool) -> torch.Tensor:
    """A thick diagonal stripe across the box [40, 20, 100, 80] (both have the same box)."""
    m = torch.zeros((100, 200), dtype=torch.bool)
    for k in range(60):
        y = 20 + k
        x = 40 + (59 - k if flip else k)
        m[y, max(40, x - 6) : min(100, x + 7)] = True
    return m


@pytest.mark.parametrize(("mask_crops", "resolution"), [(False, 200), (True, 200), (True, 37)])
def test_mask_iou_tells_apart_objects_with_the_same_box(mask_crops: bool, resolution: int) -> None:
    box = [40.0, 20.0, 100.0, 80.0]
    masks = {False: diagonal_mask(False), True: diagonal_mask(True)}
    d = Driver(match="mask_iou", mask_iou_resolution=resolution, mask_crops=mask_crops)
    history = []
    for f in range(8):
        order = [False, True] if f % 2 == 0 else [True, False]  # detector order changes
        d.step([box, box], masks=torch.stack([masks[o] for o in order]), scores=[0.9, 0.8])
        history.append(dict(zip(order, d.ids(), strict=True)))
    first = history[2]
    assert sorted(first.values()) == [1, 2]
    assert all(h == first for h in history[2:])


def test_mask_iou_function() -> None:
    a = torch.zeros((2, 10, 10), dtype=torch.bool)
    a[0, 0:4, 0:4] = True
    a[1, 5:9, 5:9] = True
    b = torch.zeros((1, 10, 10), dtype=torch.bool)
    b[0, 1:5, 1:5] = True
    shifts = np.array([[1.0, 1.0], [0.0, 0.0]])
    pairs = np.array([0, 1]), np.array([0, 0])
    iou = mask_iou(a, shifts, b, *pairs)
    assert iou.tolist() == [1.0, 0.0]  # shifted by its motion, track 0 is the detection
    unshifted = mask_iou(a, np.zeros((2, 2)), b, *pairs)
    assert unshifted[0] == pytest.approx(9 / 23)
    assert mask_iou(a, shifts, b, np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)


def test_smoothed_label_and_score() -> None:
    config = alerts(
        [{"name": "people", "type": "zone", "zone": "all", "classes": ["person"]}],
        zones={"all": {"polygon": [[0, 0], [200, 0], [200, 100], [0, 100]]}},
    )
    d = Driver(config, label_decay=0.9, score_smoothing=0.7)
    labels = [1, 1, 1, 2, 1, 2, 1, 1]
    events = []
    for i, label in enumerate(labels):
        events += d.step([[10 + i, 10, 40 + i, 40]], labels=[label], scores=[0.9])
        (track,) = d.stage.tracks("cam")
        assert track.label == 1  # one-frame flips do not change the class
    assert [e.kind for e in events] == ["enter"] and events[0].label == 1
    for i in range(8, 20):
        d.step([[10 + i, 10, 40 + i, 40]], labels=[2], scores=[0.5])
    (track,) = d.stage.tracks("cam")
    assert track.label == 2  # a lasting change wins
    assert track.score == pytest.approx(0.5, abs=0.01)
    # The published instance keeps the detector's own label.
    assert d.results[-1].instances.labels.tolist() == [2]


def test_class_aware_matching() -> None:
    d = Driver(class_aware=True)
    for _ in range(3):
        d.step([[10, 10, 40, 40]], labels=[1])
    d.step([[10, 10, 40, 40]], labels=[2])
    assert d.ids() == [-1]
    d2 = Driver(class_aware=False)
    for _ in range(3):
        d2.step([[10, 10, 40, 40]], labels=[1])
    d2.step([[10, 10, 40, 40]], labels=[2])
    assert d2.ids() == [1]


def test_input_is_not_mutated_and_ids_follow_instances() -> None:
    d = Driver()
    inst = instances([[10, 10, 40, 40], [100, 10, 130, 40]])
    from streamseg.types import Frame, FrameResult

    img = torch.zeros((0, 0, 3), dtype=torch.uint8)
    for seq in range(3):
        frame = Frame("cam", seq, seq * 0.1, seq * 0.1, img)
        out, _ = d.stage.process(FrameResult(frame, inst))
    assert inst.track_ids is None
    assert out.instances.track_ids is not None
    assert out.instances.track_ids.dtype == torch.int64
    assert out.instances.track_ids.tolist() == [1, 2]
    assert torch.equal(out.instances.boxes, inst.boxes)


def test_new_track_score() -> None:
    d = Driver(high_score=0.5, new_track_score=0.8)
    for _ in range(3):
        d.step([[10, 10, 40, 40]], scores=[0.7])
    assert d.ids() == [-1]


def test_an_object_reported_twice_starts_one_track() -> None:
    # one object detected as two classes (per-class NMS keeps both), plus a
    # distinct object: two tracks, not three; the duplicate carries no id
    d = Driver()
    boxes = [[10, 10, 40, 40], [11, 10, 41, 41], [100, 10, 130, 40]]
    for _ in range(4):
        d.step(boxes, scores=[0.9, 0.8, 0.9], labels=[1, 2, 1])
    assert d.ids() == [1, -1, 2]
    assert len(d.stage.tracks("cam")) == 2
    # once the object has a track, a later second report is no new track either
    d.step([[10, 10, 40, 40], [10, 11, 40, 41]], scores=[0.9, 0.95], labels=[1, 2])
    assert sorted(d.ids()) == [-1, 1]
    # duplicate_iou: 1 lets near copies through
    d2 = Driver(duplicate_iou=1.0)
    for _ in range(3):
        d2.step(boxes, scores=[0.9, 0.8, 0.9], labels=[1, 2, 1])
    assert d2.ids() == [1, 2, 3]


def test_a_copy_that_became_a_track_is_removed() -> None:
    # The object's track is lost for a frame; it comes back reported twice,
    # the copy overlapping too little to be caught at its start.
    d = Driver(duplicate_frames=4)
    for f in range(3):
        d.step([[10 + 2 * f, 10, 40 + 2 * f, 40]], labels=[1])
    d.step([])
    d.step([[18, 10, 48, 40], [18, 10, 48, 55]], scores=[0.9, 0.8], labels=[1, 2])
    assert d.ids() == [1, -1] and len(d.stage.tracks("cam")) == 2  # the copy: tentative
    got = []
    for f in range(5):
        x = 20 + 2 * f
        d.step([[x, 10, x + 30, 40], [x, 10, x + 30, 41]], scores=[0.9, 0.8], labels=[1, 2])
        got.append(d.ids())
    # confirmed at its 2nd hit, removed after 4 frames in a row over track 1
    assert got == [[1, 2], [1, 2], [1, 2], [1, -1], [1, -1]]
    assert [t.track_id for t in d.stage.tracks("cam")] == [1]


def test_objects_crossing_head_on_are_not_taken_for_copies() -> None:
    # Boxes that coincide mid-way, but the tracks move apart: both stay.
    d = Driver()
    a = walk(10, 30, 8, 20, size=24)
    b = walk(170, 30, -8, 20, size=24)
    seen = set()
    for f in range(20):
        d.step([a[f], b[f]], scores=[0.9, 0.85], labels=[1, 2])
        seen.update(d.ids())
    assert sorted(d.ids()) == [1, 2] and seen == {-1, 1, 2}


@pytest.mark.parametrize(("n", "m"), [(7, 5), (60, 80), (1, 1), (0, 3)])
def test_box_iou_matches_the_ops_reference(n: int, m: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.uniform(0, 200, (n, 2))
    a = np.concatenate((a, a + rng.uniform(0, 40, (n, 2))), axis=1)
    b = rng.uniform(0, 200, (m, 2))
    b = np.concatenate((b, b + rng.uniform(0, 60, (m, 2))), axis=1)
    b[:2, 2] = b[:2, 0]  # empty boxes overlap nothing
    expected = ops_box_iou(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = box_iou(a, b)
    assert got.shape == (n, m)
    np.testing.assert_allclose(got, np.nan_to_num(expected), atol=1e-9)
    rows, cols, iou = overlap_pairs(a, b)
    assert (iou > 0).all() and len(rows) == int((expected > 0).sum())
    np.testing.assert_allclose(iou, expected[rows, cols], atol=1e-9)


@pytest.mark.parametrize(("n", "limit"), [(30, 0), (300, 0), (300, 128 * 128)])
def test_assign_many_groups_equals_one_dense_problem(
    n: int, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Many objects: the grouped solution has the same total cost as one
    # dense linear_sum_assignment over everything.
    from scipy.optimize import linear_sum_assignment

    from streamseg.track import matching

    monkeypatch.setattr(matching, "DENSE_LIMIT", limit)  # 0: always split into groups
    rng = np.random.default_rng(n)
    a = rng.uniform(0, 1000, (n, 2))
    a = np.concatenate((a, a + 40), axis=1)
    b = a + rng.normal(0, 15, a.shape)
    rows, cols, iou = overlap_pairs(a, b)
    keep = iou >= 0.1
    rows, cols, iou = rows[keep], cols[keep], iou[keep]
    r, c = assign(rows, cols, 1.0 - iou, (n, n))
    dense = np.full((n, n), 1e6)
    dense[rows, cols] = 1.0 - iou
    dr, dc = linear_sum_assignment(dense)
    ok = dense[dr, dc] < 1e6
    assert len(r) == int(ok.sum())
    assert dense[r, c].sum() == pytest.approx(dense[dr[ok], dc[ok]].sum())


@pytest.mark.parametrize("seed", range(6))
def test_assign_is_optimal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t, d = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    iou = rng.uniform(0, 1, (t, d)) * (rng.uniform(0, 1, (t, d)) < 0.6)
    pr, pc = np.nonzero(iou >= 0.3)
    rows, cols = assign(pr, pc, 1.0 - iou[pr, pc], (t, d))
    assert len(set(rows.tolist())) == len(rows) and len(set(cols.tolist())) == len(cols)
    assert all(iou[r, c] >= 0.3 for r, c in zip(rows, cols, strict=True))
    got = len(rows), float(iou[rows, cols].sum())

    # brute force: the most pairs, then the highest total IoU (that is
    # what minimising 1 - IoU over feasible pairs picks when each pair costs < 1)
    best = (0, 0.0)
    for k in range(min(t, d), 0, -1):
        for rs in itertools.combinations(range(t), k):
            for cs in itertools.permutations(range(d), k):
                if all(iou[r, c] >= 0.3 for r, c in zip(rs, cs, strict=True)):
                    total = float(sum(iou[r, c] for r, c in zip(rs, cs, strict=True)))
                    best = max(best, (k, total))
        if best[0]:
            break
    assert got[0] == best[0]
    assert got[1] == pytest.approx(best[1])


def test_compacting_ids_by_table_equals_unique() -> None:
    from streamseg.track.matching import _compact

    rng = np.random.default_rng(0)
    for n in (1, 7, 300):
        values = rng.integers(0, n, 2 * n + 3)
        got, expected = _compact(values, n), np.unique(values, return_inverse=True)
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == np.int64 and g.tolist() == e.tolist()


def test_bottom_centre_helper() -> None:
    assert box_at(50, 40) == [45, 30, 55, 40]


def test_lost_track_is_found_where_it_was_last_seen() -> None:
    # The object walks right, is hidden for 4 frames and reappears where it
    # was hidden (it stopped behind the occluder): the motion model predicts
    # it 32 px further, but the last observed box still finds it.
    d = Driver()
    for i in range(6):
        d.step([[10 + 8 * i, 40, 40 + 8 * i, 70]])
    for _ in range(4):
        d.step([])
    d.step([[50, 40, 80, 70]])
    assert d.ids() == [1]


def test_lost_track_takes_a_low_score_detection() -> None:
    d = Driver()
    for _ in range(3):
        d.step([[10, 10, 40, 40]])
    d.step([])  # lost
    d.step([[11, 10, 41, 40]], scores=[0.3])  # found again, partly hidden
    assert d.ids() == [1]
    assert d.stage.tracks("cam")[0].state == TrackState.CONFIRMED


@pytest.mark.parametrize(("noise", "ids"), [(1.0, [1, 1]), (0.0, [-1, 2])])
def test_low_score_boxes_of_a_hiding_object_keep_its_velocity(noise: float, ids: list[int]) -> None:
    # A 40 px object walks right at 100 px/s (10 fps). Its front goes behind
    # a cover at x = 110: three low-score boxes of the visible piece, whose
    # centre slows down; then it is hidden for 5 frames and comes out whole.
    tracker = ByteTracker(settings=TrackingConfig(score_box_noise=noise), num_classes=2)
    speed, found = [], []
    for i in range(16):
        x = 10.0 + 10.0 * i
        box, score = [x, 30.0, x + 40, 70.0], 0.9
        if 6 <= i < 9:
            box, score = [x, 30.0, 110.0, 70.0], [0.45, 0.35, 0.3][i - 6]
        info = FrameInfo("cam", i * 0.1, i, None, (200, 400))
        if 9 <= i < 14:
            tracker.update(info, np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64))
            continue
        out = tracker.update(info, np.array([box]), np.array([score]), np.array([1]))
        speed.append(tracker.kalman.mean[0, 4])  # px/s of the first track
        if i >= 14:
            found += out.track_ids.tolist()
    # The shrinking boxes (frames 6-8) slow the track down by less than 3 px/s
    # with score-weighted noise, by more than 20 px/s without.
    change = speed[5] - speed[8]
    if noise:
        assert abs(change) < 3
    else:
        assert change > 20
    # So it is predicted where it comes out and keeps its id; without, the
    # prediction lags behind and a new track starts (tentative, then id 2).
    assert found == ids


@pytest.mark.parametrize("seed", range(5))
def test_near_pairs_and_close_pairs_equal_every_pair(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Boxes of very different sizes, some identical, some touching edges only.
    from streamseg.track import matching

    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 400, (120, 2))
    a = np.concatenate((a, a + rng.uniform(0, 1, (120, 2)) ** 3 * 200), axis=1)
    b = np.concatenate((a[:40] + rng.normal(0, 3, (40, 4)), a[40:80], rng.permutation(a)[:50]))
    b[:5, 0] = a[:5, 2]  # touching on the left edge: no overlap
    dense = box_iou(a, b)
    monkeypatch.setattr(matching, "DENSE_PAIRS", 0)  # the strip sweep
    rows, cols, iou = overlap_pairs(a, b)
    assert len(rows) == int((dense > 0).sum()) and (np.diff(rows) >= 0).all()
    np.testing.assert_allclose(iou, dense[rows, cols], atol=1e-12)
    both = np.concatenate((a, b))
    full = box_iou(both, both)
    for limit in (0.3, 0.7, 1.0):
        i, j = matching.close_pairs(both, limit)
        want = {(p, q) for p, q in zip(*np.nonzero(full >= limit), strict=True) if p < q}
        assert set(zip(i.tolist(), j.tolist(), strict=True)) == want


@pytest.mark.parametrize(
    ("options", "score", "label", "kept"),
    [
        ({}, 0.3, 1, True),  # a small low-score piece near the prediction: same track
        ({"lost_match_distance": None}, 0.3, 1, False),  # off: IoU 0.07 is too little
        ({}, 0.15, 1, False),  # below lost_match_score
        ({}, 0.3, 2, False),  # another class
    ],
)
def test_lost_track_takes_a_small_piece_near_its_prediction(
    options: dict[str, object], score: float, label: int, kept: bool
) -> None:
    d = Driver(**options)
    for i in range(6):
        d.step([[10 + 8 * i, 40, 40 + 8 * i, 70]])
    d.step([])  # hidden: lost, predicted on at 8 px a frame
    # Only an 8x8 corner shows, its centre 10 px from the predicted centre.
    d.step([[75, 56, 83, 64]], scores=[score], labels=[label])
    assert d.ids() == ([1] if kept else [-1])
