"""Zone and line points are resolved to pixels in one place (``geometry.to_pixels``
through ``CameraAlerts.shapes``), for the rules, the overlay and the zone editor alike."""

from __future__ import annotations

import pytest

from streamseg.geometry import to_pixels
from streamseg.track.alerts import CameraAlerts

SECTION = CameraAlerts(
    coordinates="normalized",
    zones={
        "bay": {"polygon": [[0.0, 0.0], [0.5, 0.0], [0.5, 1.0]]},  # the camera's default
        "door": {"polygon": [[10, 20], [30, 20], [30, 40]], "coordinates": "pixels"},
    },
    lines={"tape": {"points": [[0.25, 0.5], [0.75, 0.5]]}},
)


def test_to_pixels() -> None:
    assert to_pixels([(0.5, 0.25)], "normalized", (100, 200)) == [(100.0, 25.0)]
    assert to_pixels([(0.5, 0.25)], "normalized", (50, 100), scale=2.0) == [(50.0, 12.5)]
    assert to_pixels([(40.0, 30.0)], "pixels", (100, 200)) == [(40.0, 30.0)]
    assert to_pixels([(40.0, 30.0)], "pixels", (50, 100), scale=2.0) == [(20.0, 15.0)]


def test_shapes_follow_the_camera_default_and_each_shape_s_own() -> None:
    shapes = SECTION.shapes((100, 200))
    assert shapes.zones == {
        "bay": [(0.0, 0.0), (100.0, 0.0), (100.0, 100.0)],
        "door": [(10.0, 20.0), (30.0, 20.0), (30.0, 40.0)],
    }
    assert shapes.lines == {"tape": ((50.0, 50.0), (150.0, 50.0))}
    assert SECTION.coordinates_of(SECTION.zones["door"]) == "pixels"
    assert SECTION.coordinates_of(SECTION.lines["tape"]) == "normalized"


def test_a_scaled_down_image_gets_every_shape_scaled() -> None:
    """The console draws on a frame scaled down by 2: pixel shapes shrink with it,
    normalised ones follow the image's own size."""
    half = SECTION.shapes((50, 100), scale=2.0)
    full = SECTION.shapes((100, 200))
    for name, pts in full.zones.items():
        assert half.zones[name] == [(x / 2, y / 2) for x, y in pts], name
    assert half.lines["tape"] == ((25.0, 25.0), (75.0, 25.0))


@pytest.mark.parametrize("size", [(100, 200), (720, 1280)])
def test_the_rules_use_the_same_points(size: tuple[int, int]) -> None:
    from streamseg.track.rules.engine import CameraRules

    rules = CameraRules(camera_id="c", config=SECTION, class_names=["__background__", "a"])
    rules._build(size)
    shapes = SECTION.shapes(size)
    for name, pts in shapes.zones.items():
        assert rules._polygon(name, size).a.tolist() == [list(p) for p in pts]
    segment, sign = rules._line("tape")
    assert (tuple(segment.p.tolist()), tuple(segment.q.tolist())) == shapes.lines["tape"]
    assert sign == 1


def test_the_zone_editor_refuses_pixels_outside_the_frame_only() -> None:
    from streamseg.console.changes import _off_frame

    section = CameraAlerts(
        coordinates="normalized",
        zones={
            "bay": {"polygon": [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]},  # the whole frame: fine
            "far": {"polygon": [[10, 10], [250, 10], [10, 50]], "coordinates": "pixels"},
        },
        lines={"tape": {"points": [[5, 5], [5, 101]], "coordinates": "pixels"}},
    )
    issues = _off_frame("c", section, (100, 200))
    assert [(i.loc, i.message) for i in issues] == [
        (
            ("alerts", "cameras", "c", "zones", "far", "polygon", 1),
            "point [250, 10] is outside the 200x100 frame",
        ),
        (
            ("alerts", "cameras", "c", "lines", "tape", "points", 1),
            "point [5, 101] is outside the 200x100 frame",
        ),
    ]
    assert _off_frame("c", SECTION, (100, 200)) == []
