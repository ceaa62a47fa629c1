"""Scripted objects (ObjectSpec) land exactly where their path says."""

from __future__ import annotations

import pytest
import torch

from streamseg.synthetic.scene import ObjectSpec, SyntheticScene

H, W = 96, 128


def scene(*objects: ObjectSpec, fps: float = 10.0, **kwargs: object) -> SyntheticScene:
    return SyntheticScene(seed=0, height=H, width=W, fps=fps, objects=list(objects), **kwargs)  # type: ignore[arg-type]


def test_square_centre_follows_the_path_exactly() -> None:
    spec = ObjectSpec("square", size=(20, 10), path=[(0.0, 30.0, 40.0), (2.0, 70.0, 40.0)])
    s = scene(spec)
    # t = 1.0 s (frame 10 at 10 fps): centre (50, 40) -> pixels x 40..59, y 35..44
    gt = s.frame(10).gt
    assert gt.track_ids.tolist() == [1] and gt.labels.tolist() == [2]
    assert gt.boxes.tolist() == [[40.0, 35.0, 60.0, 45.0]]
    expected = torch.zeros((H, W), dtype=torch.bool)
    expected[35:45, 40:60] = True
    assert torch.equal(gt.masks[0], expected)
    assert s.frame(10).visibility.tolist() == [1.0]
    # t = 0.5 s: centre (40, 40)
    assert s.frame(5).gt.boxes.tolist() == [[30.0, 35.0, 50.0, 45.0]]
    # Outside the path's time range the object is absent.
    assert len(s.frame(21).gt) == 0
    assert len(s.frame(20).gt) == 1  # t = 2.0 is the last point, inclusive


@pytest.mark.parametrize("label", ["disc", "triangle", "star"])
def test_shapes_centred_on_the_path_point(label: str) -> None:
    s = scene(ObjectSpec(label, size=(31, 27), path=[(0.0, 60.0, 50.0)]))
    gt = s.frame(3).gt
    x1, y1, x2, y2 = gt.boxes[0].tolist()
    assert (x1 + x2) / 2 == pytest.approx(60.0, abs=1.0)
    assert (y1 + y2) / 2 == pytest.approx(50.0, abs=1.0)
    assert x2 - x1 == pytest.approx(31, abs=2) and y2 - y1 == pytest.approx(27, abs=2)
    assert gt.labels.tolist() == [{"disc": 1, "triangle": 3, "star": 4}[label]]
    area = int(gt.masks[0].sum())
    fill = {"disc": 3.14159 / 4, "triangle": 0.5, "star": 0.35}[label]
    assert area == pytest.approx(fill * 31 * 27, rel=0.25)


def test_appear_disappear_window() -> None:
    spec = ObjectSpec("disc", size=(20, 20), path=[(0.0, 50.0, 50.0)], appear=1.0, disappear=2.0)
    s = scene(spec)
    present = [len(s.frame(i).gt) for i in range(0, 30)]
    assert present == [0] * 10 + [1] * 10 + [0] * 10


def test_depth_order_decides_who_is_visible() -> None:
    near = ObjectSpec("square", size=(20, 20), path=[(0.0, 40.0, 40.0)], depth=1.0, track_id=7)
    far = ObjectSpec("square", size=(20, 20), path=[(0.0, 50.0, 40.0)], depth=5.0, track_id=3)
    gt = scene(near, far).frame(0).gt
    assert gt.track_ids.tolist() == [3, 7]
    # near covers x 30..49; far (x 40..59) shows only x 50..59.
    assert gt.boxes.tolist() == [[50.0, 30.0, 60.0, 50.0], [30.0, 30.0, 50.0, 50.0]]
    assert int(gt.masks[0].sum()) == 200 and int(gt.masks[1].sum()) == 400
    vis = scene(near, far).frame(0).visibility.tolist()
    assert vis == [0.5, 1.0]
    # Equal depth: the later object in the list is in front.
    a = ObjectSpec("square", size=(20, 20), path=[(0.0, 40.0, 40.0)])
    b = ObjectSpec("square", size=(20, 20), path=[(0.0, 50.0, 40.0)])
    gt = scene(a, b).frame(0).gt
    assert [int(m.sum()) for m in gt.masks] == [200, 400]


def test_partly_outside_the_frame_and_too_small() -> None:
    edge = ObjectSpec("square", size=(20, 20), path=[(0.0, 0.0, 40.0)])
    tiny = ObjectSpec("square", size=(4, 4), path=[(0.0, 100.0, 40.0)])
    s = scene(edge, tiny)
    f = s.frame(0)
    assert f.gt.boxes.tolist() == [[0.0, 30.0, 10.0, 50.0]]
    assert f.visibility.tolist() == [0.5]
    # The 16-pixel object is drawn but below min_visible_pixels (20): not in the gt.
    changed = (f.image != s.frame(0, hide={2}).image).any(dim=2)
    assert int(changed[38:42, 98:102].sum()) >= 12 and int(changed.sum()) <= 16
    assert len(scene(edge, tiny, min_visible_pixels=10).frame(0).gt) == 2


def test_colour_and_rotation() -> None:
    red = ObjectSpec("square", size=(16, 16), path=[(0.0, 30.0, 30.0)], colour=(200, 20, 20))
    s = scene(red, noise=0)
    pixels = s.frame(0).image[s.frame(0).gt.masks[0]].float()
    # The main colour covers part of the square; shading changes it by <= 12 %.
    close = ((pixels - torch.tensor([200.0, 20.0, 20.0])).abs() < 30).all(dim=1)
    assert float(close.float().mean()) > 0.2
    turned = ObjectSpec("square", size=(20, 20), path=[(0.0, 50.0, 50.0)], angle=45.0)
    box = scene(turned).frame(0).gt.boxes[0]
    assert float(box[2] - box[0]) == pytest.approx(20 * 2**0.5, abs=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"label": "circle"}, "unknown synthetic class"),
        ({"label": 0}, "unknown synthetic class"),
        ({"size": (0, 5)}, "size"),
        ({"path": []}, "at least one"),
        ({"path": [(1.0, 0, 0), (1.0, 5, 5)]}, "increasing"),
        ({"appear": 2.0, "disappear": 1.0}, "disappear"),
        ({"colour": (300, 0, 0)}, "colour"),
        ({"track_id": 0}, "track_id"),
    ],
)
def test_object_spec_errors(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"label": "disc", "size": (10, 10), "path": [(0.0, 5.0, 5.0)]}
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ObjectSpec(**base)  # type: ignore[arg-type]


def test_duplicate_track_ids_rejected() -> None:
    a = ObjectSpec("disc", size=(10, 10), path=[(0.0, 5.0, 5.0)], track_id=2)
    b = ObjectSpec("disc", size=(10, 10), path=[(0.0, 5.0, 5.0)])
    with pytest.raises(ValueError, match="unique track ids"):
        scene(a, b, a)
