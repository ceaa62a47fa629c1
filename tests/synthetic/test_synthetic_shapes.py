"""The opt-in fifth class: ``shapes=5`` adds hexagons; every scene without it is unchanged."""

from __future__ import annotations

import pytest
import torch

from streamseg.synthetic.export import scene_url
from streamseg.synthetic.scene import ObjectSpec, SyntheticScene

URL = "synthetic://?seed=7&width=160&height=120&objects=6&frames=200"


def _labels(scene: SyntheticScene) -> set[int]:
    return {int(v) for i in range(0, 200, 8) for v in scene.frame(i).gt.labels}


def test_hexagons_only_where_asked_and_the_old_classes_keep_their_labels() -> None:
    default, five = SyntheticScene.from_url(URL), SyntheticScene.from_url(f"{URL}&shapes=5")
    assert default.class_names == ("__background__", "disc", "square", "triangle", "star")
    assert five.class_names == (*default.class_names, "hexagon")
    assert _labels(default) <= {1, 2, 3, 4}
    assert 5 in _labels(five) and len(_labels(five) - {5}) >= 3
    # shapes=4 is the default scene itself, pixel for pixel.
    same = SyntheticScene.from_url(f"{URL}&shapes=4")
    for i in (0, 50, 199):
        assert torch.equal(same.frame(i).image, default.frame(i).image)
    assert scene_url(five).endswith("&shapes=5&frames=200") and "shapes" not in scene_url(same)


def test_stuff_labels_follow_the_thing_classes() -> None:
    scene = SyntheticScene.from_url(f"{URL}&shapes=5&stuff=1")
    assert scene.class_names[5:] == ("hexagon", "ground", "road", "water")
    regions = scene.frame(3).gt.regions
    assert regions is not None and set(regions.labels.tolist()) <= {6, 7, 8}


def test_a_hexagon_is_a_hexagon() -> None:
    """A scripted hexagon of 60x52 pixels: six corners, flat top, about 3/4 of its box."""
    spec = ObjectSpec(label="hexagon", size=(60, 52), path=[(0.0, 40.0, 30.0)])
    scene = SyntheticScene(seed=1, height=60, width=80, objects=[spec], noise=0, shapes=5)
    gt = scene.frame(0).gt
    assert gt.labels.tolist() == [5]
    mask = gt.masks[0]
    area = int(mask.sum())
    assert 0.7 < area / (60 * 52) < 0.8  # a regular hexagon fills 3/4 of its box
    rows = mask.any(1).nonzero().flatten()
    top, middle = mask[int(rows[0])], mask[int(rows.float().mean())]
    assert 0.4 < int(top.sum()) / int(middle.sum()) < 0.6  # flat top: half as wide


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SyntheticScene.from_url(f"{URL}&shapes=6"), "shapes must be 4"),
        (
            lambda: SyntheticScene(
                objects=[ObjectSpec(label="hexagon", size=(9, 9), path=[(0.0, 5.0, 5.0)])]
            ),
            "need shapes=5",
        ),
    ],
)
def test_bad_shapes_are_refused(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        make()
