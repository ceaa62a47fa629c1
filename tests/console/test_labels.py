"""Labels that never collide: on crowded synthetic frames every label the overlay draws
is inside the frame and covers no other label; the status badge, zone and line labels
always show; untracked low-score detections get none.

The frames are the synthetic scene's (exact masks and boxes) with many objects,
plus untracked detections of low and high score laid over them, a zone with a
vertex under the status badge, a line through the zone (their labels used to
cover each other) and objects at the right edge (whose labels were cut off).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from streamseg.console.labels import LabelLayout, overlaps
from streamseg.console.overlay import OverlayInfo, draw_overlay, layout_labels
from streamseg.synthetic.scene import SyntheticScene
from streamseg.track.alerts import CameraAlerts
from streamseg.types import Instances

ALERTS = CameraAlerts(
    coordinates="normalized",
    zones={"bay": {"polygon": [[0.0, 0.0], [0.6, 0.0], [0.6, 0.7], [0.0, 0.7]]}},
    lines={"door": {"points": [[0.3, 0.0], [0.3, 1.0]], "in_side": "left"}},
)


def crowded(seed: int, size: tuple[int, int], index: int) -> tuple[np.ndarray, Instances]:
    """A frame of many tracked objects plus untracked detections (some over the right
    edge), the scene's pixels and instances."""
    h, w = size
    scene = SyntheticScene(seed=seed, height=h, width=w, num_objects=12)
    f = scene.frame(index)
    gt: Instances = f.gt
    g = torch.Generator().manual_seed(seed * 100 + index)
    n = 10
    x1 = torch.rand(n, generator=g) * (w - 20) + 10  # some reach past the right edge
    y1 = torch.rand(n, generator=g) * (h - 10)
    boxes = torch.stack([x1, y1, (x1 + 30).clamp(max=w - 1), (y1 + 20).clamp(max=h - 1)], 1)
    extra = Instances(
        image_size=(h, w),
        boxes=boxes,
        scores=torch.linspace(0.1, 0.9, n),
        labels=torch.ones(n, dtype=torch.int64),
        masks=None,
        track_ids=torch.full((n,), -1),
    )
    inst = Instances(
        image_size=(h, w),
        boxes=torch.cat([gt.boxes.float(), extra.boxes]),
        scores=torch.cat([torch.full((len(gt),), 0.8), extra.scores]),
        labels=torch.cat([gt.labels, extra.labels]),
        masks=None,
        track_ids=torch.cat([gt.track_ids, extra.track_ids]),
    )
    return f.image.numpy(), inst


@pytest.mark.parametrize(
    ("seed", "size"), [(1, (120, 160)), (2, (240, 320)), (3, (240, 320)), (4, (480, 640))]
)
def test_crowded_frames_labels_never_collide_nor_leave_the_frame(
    seed: int, size: tuple[int, int]
) -> None:
    h, w = size
    scene = SyntheticScene(seed=seed, height=h, width=w, num_objects=12)
    info = OverlayInfo(
        class_names=scene.class_names,
        alerts=ALERTS,
        counts={"bay": 7, "door": (12, 30)},
        status="synth-b  streaming  10.6 fps",
    )
    for index in (3, 17, 40):
        image, inst = crowded(seed, size, index)
        labels = layout_labels(inst, info, size)
        boxes = [label.box for label in labels]
        for a, b in itertools.combinations(boxes, 2):
            assert not overlaps(a, b), (a, b)
        assert all(x0 >= 0 and y0 >= 0 and x1 <= w and y1 <= h for x0, y0, x1, y1 in boxes), boxes
        texts = [label.text for label in labels]
        # The badge top left, then the zone's and the line's names and counts, always.
        assert labels[0].box[:2] == (0, 0) and texts[0].startswith("synth-b")
        assert "bay: 7" in texts and "door: in 12 out 30" in texts, texts
        # Untracked detections under 0.5 get no label; tracked ones come first.
        scores = {f"{s:.2f}" for s in inst.scores[inst.track_ids < 0].tolist() if s < 0.5}
        plain = [t for t in texts if "#" not in t and t.split(" ")[-1] in scores]
        assert plain == [], plain
        kinds = ["#" in t for t in texts[3:]]
        assert kinds == sorted(kinds, reverse=True), texts  # no tracked label after untracked
        # What is drawn is what was laid out: each label's background at its box.
        out = draw_overlay(image, inst, info)
        for label in labels:
            _left, _top, right, bottom = label.box
            assert tuple(out[bottom - 1, right - 1]) == label.bg, label


def test_a_label_without_room_is_left_out_not_drawn_over_another() -> None:
    layout = LabelLayout(40, 12, measure=lambda text: (6 * len(text), 8))
    assert layout.place("abcde", [(0, 0, 0, 0)], bg=(0, 0, 0)) is not None
    assert layout.place("fghij", [(0, 0, 0, 0)], bg=(0, 0, 0)) is None  # the frame is full
    wide = layout.place("x" * 40, [(0, 0, 0, 0)], bg=(0, 0, 0))
    assert wide is None or wide.box[2] <= 40


def test_a_long_status_is_cut_to_the_frame() -> None:
    info = OverlayInfo(status="a-camera-with-a-very-long-name  streaming  10.6 fps")
    (badge,) = layout_labels(Instances.empty((60, 80)), info, (60, 80))
    assert badge.box[2] <= 80 and badge.text.endswith("~")
