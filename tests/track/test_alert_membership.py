"""Zone membership by anchor: the cell map's shortcut decides exactly as the full depth test."""

from __future__ import annotations

import numpy as np
import pytest

from streamseg.geometry import Polygon
from streamseg.track.rules.membership import IN, OUT, UNKNOWN, Membership


def exact(polygon: Polygon, band: float, points: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """The rule as written in the module docstring, from the exact depth of every point."""
    depth = polygon.depth(points)
    enter = depth >= band
    stay = (depth >= 0) | (-depth < band)
    first = depth >= 0
    return np.where(prev == IN, stay, np.where(prev == OUT, enter, first))


@pytest.mark.parametrize("band", [0.0, 2.0, 7.5])
@pytest.mark.parametrize("seed", range(4))
def test_cell_map_decides_like_the_exact_depth(band: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # A star-shaped polygon (concave), vertices on whole and fractional pixels.
    angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
    radius = rng.uniform(40, 160, 7)
    vertices = np.stack((300 + radius * np.cos(angles), 200 + radius * np.sin(angles)), axis=1)
    vertices[:3] = np.round(vertices[:3])
    polygon = Polygon(vertices)
    member = Membership(
        polygon=polygon, anchor="center", band=band, mask_fraction=None, mask_band=0.0
    )
    # Random points, points on edges and vertices, and points just off them.
    t = rng.uniform(0, 1, (300, 1))
    edge = rng.integers(0, 7, 300)
    on_edges = polygon.a[edge] * (1 - t) + polygon.b[edge] * t
    points = np.concatenate(
        (
            rng.uniform(-50, 650, (2000, 2)),
            vertices,
            on_edges,
            on_edges + rng.normal(0, band + 0.5, on_edges.shape),
        )
    )
    # Where a track was first seen: the cell map, then exact depths near the boundary.
    np.testing.assert_array_equal(member.contains(points), polygon.contains(points))
    for start in range(0, len(points), 10):
        few = points[start : start + 10]
        np.testing.assert_array_equal(member.contains(few), polygon.contains(few))
    for prev_state in (UNKNOWN, OUT, IN):
        prev = np.full(len(points), prev_state, np.int8)
        expected = exact(polygon, band, points, prev)
        got = member._by_anchor(points, np.arange(len(points)), prev)
        np.testing.assert_array_equal(got, expected)
        # A few points at a time: the exact depths come from the plain-Python path.
        for start in range(0, len(points), 10):
            few = np.arange(start, min(start + 10, len(points)))
            got = member._by_anchor(points, few, prev[few])
            np.testing.assert_array_equal(got, expected[few])


def test_plain_python_depth_equals_the_polygons() -> None:
    rng = np.random.default_rng(7)
    polygon = Polygon(
        np.array([[10.0, 10.0], [90.5, 20.0], [60.0, 80.0], [40.0, 40.0], [5.0, 70.0]])
    )
    member = Membership(polygon=polygon, anchor="center", band=2.0, mask_fraction=None, mask_band=0)
    member._by_anchor(np.zeros((1, 2)), np.arange(1), np.full(1, UNKNOWN, np.int8))
    assert member._cells is not None
    points = np.concatenate((rng.uniform(0, 100, (500, 2)), polygon.a, (polygon.a + polygon.b) / 2))
    got = [member._cells.depth(x, y) for x, y in points.tolist()]
    assert got == polygon.depth(points).tolist()  # bit for bit


def test_cameras_with_the_same_zone_share_its_cell_map() -> None:
    """The map is built once per zone shape and band, not once per camera's copy."""
    vertices = np.array([[0.0, 0.0], [100.0, 0.0], [100.0, 50.0], [3.0, 61.5]])
    maps = []
    for _ in range(2):  # two cameras: each scales its own copy of the zone
        member = Membership(
            polygon=Polygon(vertices.copy()), anchor="center", band=1.5, mask_fraction=None,
            mask_band=0.0,
        )  # fmt: skip
        member.contains(np.array([[50.0, 20.0]]))
        maps.append(member._cells)
    other = Membership(
        polygon=Polygon(vertices + 1), anchor="center", band=1.5, mask_fraction=None, mask_band=0
    )
    other.contains(np.array([[50.0, 20.0]]))
    assert maps[0] is not None and maps[0] is maps[1]
    assert other._cells is not maps[0]
