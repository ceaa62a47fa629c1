"""Plane geometry for zones and lines, vectorised over points (numpy, float64 pixels).

Frame pixels: x to the right, y down; a pixel ``(x, y)`` covers
``[x, x + 1) x [y, y + 1)``. Boundaries are closed: a point on a zone's
edge or vertex is inside, a path that touches a line's endpoint crosses it.
Distances are pixels. ``EPS`` absorbs float rounding in those tests.

Zones and lines are written in frame pixels or normalised to the frame
(``[0, 1]`` of its width and height); :func:`to_pixels` is the one place
that turns either into pixels, and :class:`Shapes` holds a camera's zones
and lines resolved so (``CameraAlerts.shapes(size)`` builds it for the
rules, the console's overlay and the zone editor).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ANCHORS",
    "EPS",
    "Anchor",
    "Coordinates",
    "Point",
    "Polygon",
    "Segment",
    "Shapes",
    "anchor_points",
    "polygon_area",
    "self_crossing",
    "to_pixels",
]

F64 = NDArray[np.float64]
Bool = NDArray[np.bool_]

EPS = 1e-6

Anchor = Literal[
    "center",
    "bottom_center",
    "top_center",
    "left_center",
    "right_center",
    "top_left",
    "top_right",
    "bottom_left",
    "bottom_right",
]
# Where each anchor sits in its box, as fractions (fx, fy) of width and height.
ANCHORS: dict[str, tuple[float, float]] = {
    "center": (0.5, 0.5),
    "bottom_center": (0.5, 1.0),
    "top_center": (0.5, 0.0),
    "left_center": (0.0, 0.5),
    "right_center": (1.0, 0.5),
    "top_left": (0.0, 0.0),
    "top_right": (1.0, 0.0),
    "bottom_left": (0.0, 1.0),
    "bottom_right": (1.0, 1.0),
}


Point = tuple[float, float]
Coordinates = Literal["pixels", "normalized"]


def to_pixels(
    points: Sequence[Point], coordinates: Coordinates, size: tuple[int, int], *, scale: float = 1.0
) -> list[Point]:
    """``points`` in the pixels of an image of ``size`` ``(H, W)`` showing the frame at
    ``1 / scale`` (``scale``: frame pixels per image pixel; 1 for the frame itself).

    ``normalized`` points are fractions of the image's width and height;
    ``pixels`` points are frame pixels, divided by ``scale``.
    """
    if coordinates == "normalized":
        h, w = size
        return [(x * w, y * h) for x, y in points]
    return [(x / scale, y / scale) for x, y in points]


@dataclasses.dataclass(frozen=True)
class Shapes:
    """A camera's zones (polygons) and lines (``p -> q``) in pixels, by name, in the
    order they were written (see :func:`to_pixels`)."""

    zones: dict[str, list[Point]]
    lines: dict[str, tuple[Point, Point]]


def polygon_area(points: Sequence[Point]) -> float:
    """The area of the polygon with vertices ``points`` (either winding), square pixels."""
    s = 0.0
    for (x1, y1), (x2, y2) in zip(points, [*points[1:], *points[:1]], strict=True):
        s += x1 * y2 - x2 * y1
    return abs(s) / 2


def self_crossing(points: Sequence[Point]) -> tuple[int, int] | None:
    """The first pair ``(i, j)`` of non-adjacent edges (edge ``i`` runs from vertex
    ``i`` to ``i + 1``) that touch, else ``None``: the polygon is simple."""
    n = len(points)
    edges = [(points[i], points[(i + 1) % n]) for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if j == i + 1 or (i == 0 and j == n - 1):
                continue
            if _segments_touch(*edges[i], *edges[j]):
                return i, j
    return None


def _segments_touch(a: Point, b: Point, c: Point, d: Point) -> bool:
    """The closed segments ``a-b`` and ``c-d`` share a point (exact arithmetic on the inputs)."""

    def orient(p: Point, q: Point, r: Point) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    def on(p: Point, q: Point, r: Point) -> bool:
        return min(p[0], q[0]) <= r[0] <= max(p[0], q[0]) and min(p[1], q[1]) <= r[1] <= max(
            p[1], q[1]
        )

    o1, o2, o3, o4 = orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
    if ((o1 > 0 > o2) or (o1 < 0 < o2)) and ((o3 > 0 > o4) or (o3 < 0 < o4)):
        return True
    return (
        (o1 == 0 and on(a, b, c))
        or (o2 == 0 and on(a, b, d))
        or (o3 == 0 and on(c, d, a))
        or (o4 == 0 and on(c, d, b))
    )


def anchor_points(boxes: F64, anchor: str) -> F64:
    """``(K, 2)`` points of ``boxes (K, 4)`` xyxy at ``anchor`` (e.g. ``bottom_center``)."""
    fx, fy = ANCHORS[anchor]
    x = boxes[:, 0] + fx * (boxes[:, 2] - boxes[:, 0])
    y = boxes[:, 1] + fy * (boxes[:, 3] - boxes[:, 1])
    return np.stack((x, y), axis=1)


def _segment_distance(points: F64, a: F64, b: F64) -> F64:
    """Distance ``(K, E)`` from ``points (K, 2)`` to segments ``a (E, 2) -> b (E, 2)``."""
    ab = b - a  # (E, 2)
    ap = points[:, None, :] - a[None, :, :]  # (K, E, 2)
    length2 = np.maximum((ab * ab).sum(1), 1e-300)
    t = np.clip((ap * ab[None]).sum(2) / length2[None], 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    diff = points[:, None, :] - closest
    out: F64 = np.sqrt((diff * diff).sum(2))
    return out


class Polygon:
    """A simple polygon from ``vertices (V, 2)`` pixels (either winding)."""

    def __init__(self, vertices: F64) -> None:
        self.a = np.asarray(vertices, np.float64)
        self.b = np.roll(self.a, -1, axis=0)
        self.lo = self.a.min(0)
        self.hi = self.a.max(0)

    def depth(self, points: F64) -> F64:
        """Signed distance ``(K,)`` to the boundary: ``> 0`` inside, ``< 0`` outside, 0 on it."""
        if len(points) == 0:
            return np.zeros(0)
        dist = _segment_distance(points, self.a, self.b).min(1)
        inside = self._crossings_odd(points) | (dist <= EPS)
        return np.where(inside, dist, -dist)

    def contains(self, points: F64) -> Bool:
        """``(K,)`` bool: the point is inside or on the boundary."""
        return self.depth(points) >= 0

    def _crossings_odd(self, points: F64) -> Bool:
        px, py = points[:, 0:1], points[:, 1:2]  # (K, 1)
        ax, ay, bx, by = self.a[:, 0], self.a[:, 1], self.b[:, 0], self.b[:, 1]
        straddle = (ay > py) != (by > py)  # (K, E): the edge crosses the ray's height
        with np.errstate(divide="ignore", invalid="ignore"):
            x_cross = ax + (py - ay) * (bx - ax) / (by - ay)
        hits = straddle & (px < x_cross)
        odd: Bool = (hits.sum(1) % 2) == 1
        return odd

    def raster(self, image_size: tuple[int, int], stride: int) -> Bool:
        """Which cells of the mask grid lie in the polygon: ``(h, w)`` bool.

        Cell ``(i, j)`` is the pixel ``(x, y) = (stride // 2 + j * stride,
        stride // 2 + i * stride)``, tested at its centre ``+ 0.5``, matching
        ``streamseg.track.matching.MaskGrid``.
        """
        height, width = image_size
        ys = np.arange(stride // 2, height, stride) + 0.5
        xs = np.arange(stride // 2, width, stride) + 0.5
        gx, gy = np.meshgrid(xs, ys)
        pts = np.stack((gx.ravel(), gy.ravel()), axis=1)
        near = (
            (pts[:, 0] >= self.lo[0])
            & (pts[:, 0] <= self.hi[0])
            & (pts[:, 1] >= self.lo[1])
            & (pts[:, 1] <= self.hi[1])
        )
        out = np.zeros(len(pts), bool)
        out[near] = self.contains(pts[near])
        return out.reshape(len(ys), len(xs))


class Segment:
    """A directed segment ``p -> q`` (pixels) with a signed side.

    ``side > 0`` is the right-hand side looking from ``p`` to ``q`` on
    screen (y down), ``side < 0`` the left-hand side.
    """

    def __init__(self, p: tuple[float, float], q: tuple[float, float]) -> None:
        self.p = np.asarray(p, np.float64)
        self.q = np.asarray(q, np.float64)
        self.d = self.q - self.p
        self.length = float(np.hypot(*self.d))

    def signed_distance(self, points: F64) -> F64:
        """``(K,)`` distance of points to the infinite line, positive on the right side."""
        v = points - self.p
        out: F64 = (self.d[0] * v[:, 1] - self.d[1] * v[:, 0]) / self.length
        return out

    def touched_by(self, start: F64, end: F64) -> Bool:
        """``(K,)`` bool: the closed path ``start -> end`` touches this closed segment.

        Rows with NaN coordinates give ``False``. Up to ``FEW_PATHS`` rows are
        tested one by one with Python floats (the same operations in the same
        order), where numpy's cost per call would dominate.
        """
        if len(start) <= FEW_PATHS:
            (px, py), (qx, qy) = self.p.tolist(), self.q.tolist()
            return np.array(
                [
                    _touches(px, py, qx, qy, self.length, sx, sy, ex, ey)
                    for (sx, sy), (ex, ey) in zip(start.tolist(), end.tolist(), strict=True)
                ],
                dtype=bool,
            )
        o1 = _orient(self.p, self.q, start) / self.length
        o2 = _orient(self.p, self.q, end) / self.length
        path = np.maximum(np.hypot(*(end - start).T), 1e-300)
        o3 = _orient_rows(start, end, self.p) / path
        o4 = _orient_rows(start, end, self.q) / path
        proper = (o1 * o2 < 0) & (o3 * o4 < 0)
        on = (
            ((np.abs(o1) <= EPS) & _within(self.p, self.q, start))
            | ((np.abs(o2) <= EPS) & _within(self.p, self.q, end))
            | ((np.abs(o3) <= EPS) & _within_rows(start, end, self.p))
            | ((np.abs(o4) <= EPS) & _within_rows(start, end, self.q))
        )
        out: Bool = (proper | on) & ~np.isnan(start).any(1) & ~np.isnan(end).any(1)
        return out


FEW_PATHS = 8


def _touches(
    px: float, py: float, qx: float, qy: float, length: float,
    sx: float, sy: float, ex: float, ey: float,
) -> bool:  # fmt: skip
    """``Segment.touched_by`` for one path ``(sx, sy) -> (ex, ey)``, in Python floats."""
    if math.isnan(sx) or math.isnan(sy) or math.isnan(ex) or math.isnan(ey):
        return False
    o1 = ((qx - px) * (sy - py) - (qy - py) * (sx - px)) / length
    o2 = ((qx - px) * (ey - py) - (qy - py) * (ex - px)) / length
    path = max(math.hypot(ex - sx, ey - sy), 1e-300)
    o3 = ((ex - sx) * (py - sy) - (ey - sy) * (px - sx)) / path
    o4 = ((ex - sx) * (qy - sy) - (ey - sy) * (qx - sx)) / path
    if o1 * o2 < 0 and o3 * o4 < 0:
        return True
    return (
        (abs(o1) <= EPS and _inside_box(px, py, qx, qy, sx, sy))
        or (abs(o2) <= EPS and _inside_box(px, py, qx, qy, ex, ey))
        or (abs(o3) <= EPS and _inside_box(sx, sy, ex, ey, px, py))
        or (abs(o4) <= EPS and _inside_box(sx, sy, ex, ey, qx, qy))
    )


def _inside_box(ax: float, ay: float, bx: float, by: float, x: float, y: float) -> bool:
    """``(x, y)`` lies in the bounding box of ``a, b`` (inclusive, with ``_within``'s margin)."""
    m = EPS * 10
    return min(ax, bx) - m <= x <= max(ax, bx) + m and min(ay, by) - m <= y <= max(ay, by) + m


def _orient(p: F64, q: F64, r: F64) -> F64:
    """Cross product ``(q - p) x (r - p)`` for points ``r (K, 2)``."""
    return (q[0] - p[0]) * (r[:, 1] - p[1]) - (q[1] - p[1]) * (r[:, 0] - p[0])


def _orient_rows(p: F64, q: F64, r: F64) -> F64:
    """Cross product ``(q - p) x (r - p)`` for rows ``p, q (K, 2)`` and one point ``r``."""
    return (q[:, 0] - p[:, 0]) * (r[1] - p[:, 1]) - (q[:, 1] - p[:, 1]) * (r[0] - p[:, 0])


def _within(p: F64, q: F64, r: F64) -> Bool:
    """``r (K, 2)`` lies in the bounding box of ``p, q`` (inclusive, with a margin)."""
    m = EPS * 10
    return (
        (np.minimum(p[0], q[0]) - m <= r[:, 0])
        & (r[:, 0] <= np.maximum(p[0], q[0]) + m)
        & (np.minimum(p[1], q[1]) - m <= r[:, 1])
        & (r[:, 1] <= np.maximum(p[1], q[1]) + m)
    )


def _within_rows(p: F64, q: F64, r: F64) -> Bool:
    m = EPS * 10
    return (
        (np.minimum(p[:, 0], q[:, 0]) - m <= r[0])
        & (r[0] <= np.maximum(p[:, 0], q[:, 0]) + m)
        & (np.minimum(p[:, 1], q[:, 1]) - m <= r[1])
        & (r[1] <= np.maximum(p[:, 1], q[:, 1]) + m)
    )
