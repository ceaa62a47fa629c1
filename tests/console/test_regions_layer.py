"""The overlays' class-regions layer: class colours under the instances, and a legend."""

from __future__ import annotations

import numpy as np
import torch

from streamseg.console.overlay import OverlayInfo, draw_overlay, render_image, scale_down
from streamseg.console.regions_layer import REGION_ALPHA, region_color
from streamseg.types import Instances, Regions

NAMES = ("__background__", "person", "road", "water")


def _frame() -> tuple[np.ndarray, Instances]:
    label_map = torch.zeros((80, 120), dtype=torch.int16)
    label_map[40:, :] = 2  # road
    label_map[:20, 80:] = 3  # water
    mask = torch.zeros((1, 80, 120), dtype=torch.bool)
    mask[0, 30:50, 50:60] = True
    label_map[mask[0]] = 0  # panoptic: the person's pixels are no region's
    inst = Instances(
        image_size=(80, 120),
        boxes=torch.tensor([[50.0, 30, 60, 50]]),
        scores=torch.tensor([0.9]),
        labels=torch.tensor([1]),
        masks=mask,
        track_ids=torch.tensor([5]),
        regions=Regions.from_label_map(label_map),
    )
    return np.full((80, 120, 3), 100, np.uint8), inst


def test_regions_are_tinted_with_their_class_colour_under_the_instances() -> None:
    image, inst = _frame()
    out = draw_overlay(image, inst, OverlayInfo(class_names=NAMES))
    for (y, x), label in (((60, 100), 2), ((5, 110), 3)):
        want = 100 * (1 - REGION_ALPHA) + np.array(region_color(label)) * REGION_ALPHA
        assert np.abs(out[y, x].astype(float) - want).max() <= 1.0
    assert (out[30, 5] == 100).all()  # no region, no instance: untouched
    assert not (out[40, 55] == out[60, 100]).all()  # the person is painted over, not tinted


def test_legend_names_each_region_with_its_colour() -> None:
    image, inst = _frame()
    out = draw_overlay(image, inst, OverlayInfo(class_names=NAMES))
    corner = out[50:, :40].reshape(-1, 3)
    for label in (2, 3):  # each class's exact swatch colour is in the legend's corner
        assert (corner == np.array(region_color(label), np.uint8)).all(1).any()
    plain = draw_overlay(image, inst.replace(regions=None), OverlayInfo(class_names=NAMES))
    assert not (plain[50:, :40].reshape(-1, 3) == np.array(region_color(2))).all(1).any()


def test_scaled_down_frames_keep_their_regions() -> None:
    image, inst = _frame()
    _, small, _ = scale_down(image, inst, OverlayInfo(), 2)
    assert small.regions is not None and small.regions.image_size == (40, 60)
    assert small.regions.labels.tolist() == [2, 3]
    jpeg = render_image(image, inst, OverlayInfo(class_names=NAMES), quality=80, max_width=60)
    assert jpeg[:2] == b"\xff\xd8"
