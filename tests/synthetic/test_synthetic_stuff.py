"""Synthetic scenes with stuff: ground, road and water regions with an exact label map."""

from __future__ import annotations

import torch

from streamseg.synthetic.export import scene_url
from streamseg.synthetic.scene import SyntheticScene


def test_stuff_regions_cover_every_pixel_no_object_covers() -> None:
    scene = SyntheticScene.from_url("synthetic://?seed=5&width=160&height=120&objects=5&stuff=1")
    assert scene.class_names[5:] == ("ground", "road", "water")
    for index in (0, 7, 30):
        frame = scene.frame(index)
        regions = frame.gt.regions
        assert regions is not None
        things = frame.gt.masks.any(0)
        labelled = regions.label_map > 0
        assert not bool((things & labelled).any())  # things and stuff are disjoint
        # Pixels neither labels cover are objects too small for the ground truth.
        uncovered = ~(things | labelled)
        hidden = scene.frame(index, hide=frame.gt.track_ids.tolist())
        assert bool((hidden.gt.regions.label_map[uncovered] > 0).all()) or not uncovered.any()
        assert set(regions.labels.tolist()) <= {5, 6, 7} and 5 in regions.labels.tolist()
        assert int(regions.areas.sum()) == int(labelled.sum())


def test_the_label_map_says_what_the_pixels_show() -> None:
    """Road pixels are dark grey, water pixels blue: the look of each class."""
    scene = SyntheticScene(seed=8, height=96, width=128, num_objects=0, stuff=True, noise=0)
    frame = scene.frame(0)
    image = frame.image.float()
    lm = frame.gt.regions.label_map
    road, water = image[lm == 6], image[lm == 7]
    assert len(road) and len(water)
    assert float((road.max(1).values - road.min(1).values).median()) < 30  # grey
    assert bool((water[:, 2] > water[:, 0]).float().mean() > 0.95)  # blue over red


def test_stuff_scenes_are_deterministic_and_plain_scenes_unchanged() -> None:
    url = "synthetic://?seed=4&width=96&height=64&objects=3&stuff=1&shake=0.05"
    a, b = SyntheticScene.from_url(url).frame(12), SyntheticScene.from_url(url).frame(12)
    assert torch.equal(a.image, b.image)
    assert torch.equal(a.gt.regions.label_map, b.gt.regions.label_map)
    plain = SyntheticScene(seed=4, height=64, width=96, num_objects=3)
    assert plain.frame(0).gt.regions is None and plain.class_names[-1] == "star"
    assert "stuff=1" in scene_url(SyntheticScene.from_url(url))
