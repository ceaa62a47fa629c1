"""synthetic:// URLs: every parameter, defaults, and clear errors."""

from __future__ import annotations

import pytest

from streamseg.synthetic.scene import (
    URL_PARAMETERS,
    ObjectSpec,
    SyntheticScene,
    parse_synthetic_url,
)


def test_all_parameters() -> None:
    scene = SyntheticScene.from_url(
        "synthetic://?seed=3&width=160&height=120&fps=12.5&objects=2&frames=30"
        "&noise=0&shake=0.02&min_pixels=5"
    )
    assert (scene.seed, scene.width, scene.height, scene.fps) == (3, 160, 120, 12.5)
    assert (scene.num_objects, scene.num_frames, len(scene)) == (2, 30, 30)
    assert (scene.noise, scene.shake, scene.min_visible_pixels) == (0, 0.02, 5)
    assert tuple(scene.frame(29).image.shape) == (120, 160, 3)


def test_defaults_and_overrides() -> None:
    scene = SyntheticScene.from_url("synthetic://")
    assert (scene.seed, scene.height, scene.width, scene.fps, scene.num_objects) == (
        0,
        360,
        640,
        15.0,
        6,
    )
    assert scene.num_frames is None
    spec = ObjectSpec("star", size=(10, 10), path=[(0.0, 20.0, 20.0)])
    scripted = SyntheticScene.from_url("synthetic://?width=64&height=48", objects=[spec])
    assert scripted.num_objects == 1 and scripted.frame(0).gt.labels.tolist() == [4]
    # Same URL, same video.
    a = SyntheticScene.from_url("synthetic://?seed=4&width=64&height=48").frame(3)
    b = SyntheticScene(seed=4, width=64, height=48).frame(3)
    assert bool((a.image == b.image).all())


@pytest.mark.parametrize(
    ("url", "patterns"),
    [
        ("synthetic://?seed=1&colour=red", ["'colour'", "valid parameters", "seed", "min_pixels"]),
        ("synthetic://?seed=x", ["seed='x'", "integer"]),
        ("synthetic://?fps=fast", ["fps='fast'", "number"]),
        ("synthetic://?width=8", ["16..8192"]),
        ("synthetic://?fps=-1", ["fps must be > 0"]),
        ("synthetic://?frames=0", ["frames (num_frames) must be >= 1"]),
        ("synthetic://?objects=-2", ["objects (num_objects) must be 0..1000"]),
        ("synthetic://?noise=20", ["noise must be 0..8"]),
        ("synthetic://?shake=1", ["shake must be"]),
        ("synthetic://?min_pixels=0", ["min_pixels must be >= 1"]),
        ("synthetic://?seed=1&seed=2", ["'seed' is given more than once"]),
        ("rtsp://cam/stream?seed=1", ["not a synthetic:// URL"]),
    ],
)
def test_errors_name_the_parameter(url: str, patterns: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        SyntheticScene.from_url(url)
    for pattern in patterns:
        assert pattern in str(info.value)


def test_parse_only_returns_given_keywords() -> None:
    assert parse_synthetic_url("synthetic://?seed=2&objects=3") == {"seed": 2, "num_objects": 3}
    assert set(URL_PARAMETERS) >= {"seed", "width", "height", "fps", "objects", "frames"}
