"""Overlays on synthetic frames with exact ground truth: a track's colour lies on its object."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from streamseg.console.overlay import (
    OverlayInfo,
    draw_overlay,
    encode_jpeg,
    scale_down,
    shade,
    track_color,
)
from streamseg.synthetic.scene import SyntheticScene
from streamseg.track.alerts import CameraAlerts
from streamseg.types import Instances, MaskCrops


def colour_pixels(image: np.ndarray, color: tuple[int, int, int]) -> np.ndarray:
    return np.all(image == np.asarray(color, np.uint8), axis=-1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_track_colours_lie_on_the_ground_truth_masks(seed: int) -> None:
    scene = SyntheticScene(seed=seed, height=120, width=160, num_objects=4)
    f = scene.frame(5)
    gt: Instances = f.gt
    assert len(gt) >= 1
    image = f.image.numpy()
    out = draw_overlay(image, gt, OverlayInfo(class_names=scene.class_names, status="cam 1.0 fps"))
    assert out.shape == image.shape and out.dtype == np.uint8
    assert not np.array_equal(out, image)
    for tid, mask in zip(gt.track_ids.tolist(), gt.masks.numpy(), strict=True):
        drawn = colour_pixels(out, track_color(tid)) & ~colour_pixels(image, track_color(tid))
        if mask.sum() < 4:
            continue
        assert drawn.sum() > 0, f"track {tid}: no pixel of its colour"
        assert (drawn & ~mask).sum() == 0, f"track {tid}: its colour is off its mask"
        # The fill changes (nearly) every pixel of the mask.
        changed = np.any(out != image, axis=-1)
        assert (changed & mask).sum() >= 0.95 * mask.sum()


def test_colours_differ_and_boxes_use_the_shade() -> None:
    colours = {track_color(i) for i in range(1, 40)}
    assert len(colours) == 39
    assert all(shade(c) != c for c in colours)


def test_zones_lines_and_counts_are_drawn() -> None:
    image = np.full((120, 160, 3), 40, np.uint8)
    alerts = CameraAlerts(
        zones={"dock": {"polygon": [[10, 10], [100, 10], [100, 100], [10, 100]]}},
        lines={"door": {"points": [[0.9, 0.0], [0.9, 1.0]], "coordinates": "normalized"}},
    )
    info = OverlayInfo(alerts=alerts, counts={"dock": 2, "door": (3, 1)})
    out = draw_overlay(image, Instances.empty((120, 160)), info)
    assert colour_pixels(out, (255, 210, 0))[90, 100]  # the zone's right edge
    assert colour_pixels(out, (0, 230, 255))[100, 144]  # the line at x = 0.9 * 160
    jpeg = encode_jpeg(out, quality=80)
    assert Image.open(io.BytesIO(jpeg)).size == (160, 120)


def test_untracked_instances_and_trails() -> None:
    masks = torch.zeros((1, 50, 60), dtype=torch.bool)
    masks[0, 10:30, 10:40] = True
    inst = Instances(
        image_size=(50, 60),
        boxes=torch.tensor([[10.0, 10.0, 40.0, 30.0]]),
        scores=torch.tensor([0.9]),
        labels=torch.tensor([1]),
        masks=masks,
        track_ids=torch.tensor([5]),
    )
    image = np.zeros((50, 60, 3), np.uint8)
    info = OverlayInfo(
        class_names=("__background__", "box"), trails={5: [(2.0, 45.0), (25.0, 20.0)]}
    )
    out = draw_overlay(image, inst, info)
    assert colour_pixels(out, shade(track_color(5))).sum() > 0
    untracked = inst.replace(track_ids=None)
    out2 = draw_overlay(image, untracked, OverlayInfo())
    assert colour_pixels(out2, track_color(-1))[29, 20]  # the mask's bottom edge


def test_scaled_down_views_keep_colours_on_the_masks() -> None:
    from streamseg.console.overlay import render_jpeg, scale_down

    scene = SyntheticScene(seed=4, height=240, width=320, num_objects=5)
    f = scene.frame(8)
    alerts = CameraAlerts(zones={"z": {"polygon": [[20, 20], [300, 20], [300, 220]]}})
    info = OverlayInfo(class_names=scene.class_names, alerts=alerts, trails={1: [(100.0, 100.0)]})
    image, inst, small_info = scale_down(f.image, f.gt, info, 2)
    assert image.shape == (120, 160, 3) and inst.image_size == (120, 160)
    assert small_info.scale == 2 and small_info.trails[1] == [(50.0, 50.0)]
    out = draw_overlay(image, inst, small_info)
    assert colour_pixels(out, (255, 210, 0))[10, 80]  # the zone's top edge, halved
    for tid, mask in zip(inst.track_ids.tolist(), inst.masks.numpy(), strict=True):
        drawn = colour_pixels(out, track_color(tid)) & ~colour_pixels(image, track_color(tid))
        assert (drawn & ~mask).sum() == 0
    jpeg = render_jpeg(f.image, f.gt, info, quality=70, max_width=100)  # 320 -> 80 wide
    assert Image.open(io.BytesIO(jpeg)).size == (80, 60)


@pytest.mark.parametrize("seed", [1, 4])
def test_crops_draw_exactly_what_frame_masks_draw(seed: int) -> None:
    """Serve hands the console box-local crops; the picture is the same as from full masks."""
    scene = SyntheticScene(seed=seed, height=120, width=160, num_objects=5)
    f = scene.frame(7)
    gt: Instances = f.gt
    assert gt.masks is not None and len(gt) >= 1
    as_crops = gt.replace(masks=MaskCrops.from_masks(gt.frame_masks()))
    info = OverlayInfo(class_names=scene.class_names, status="cam")
    image = f.image.numpy()
    assert np.array_equal(draw_overlay(image, as_crops, info), draw_overlay(image, gt, info))
    small_crops, _, _ = scale_down(image, as_crops, info, 2)
    small_full, reduced, _ = scale_down(image, gt, info, 2)
    assert np.array_equal(small_crops, small_full) and reduced.masks is not None
