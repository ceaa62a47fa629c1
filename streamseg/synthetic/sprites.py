"""Pixels of synthetic scenes: object sprites, the background, sensor noise.

Everything here is made once (per object, per scene) with numpy and then
reused for every frame, so that rendering a frame is only slicing and
pasting. Shapes and textures are defined in normalised coordinates, so an
object looks the same at any pixel size.

Colours are kept inside ``[LEVEL_MARGIN, 255 - LEVEL_MARGIN]`` so that
per-frame sensor noise of up to ``LEVEL_MARGIN`` levels can be added with
plain ``uint8`` arithmetic (no clipping pass).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = [
    "LEVEL_MARGIN",
    "Appearance",
    "Sprite",
    "label_id",
    "make_appearance",
    "make_background",
    "make_noise_field",
    "make_sprite",
]

LEVEL_MARGIN = 8  # colours stay in [8, 247]; sensor noise is at most +-8 levels

# Label ids (see ``SHAPE_CLASS_NAMES`` in ``scene.py``). HEXAGON is the
# opt-in fifth class (a scene's ``shapes=5``), for teaching a model a new class.
DISC, SQUARE, TRIANGLE, STAR, HEXAGON = 1, 2, 3, 4, 5
CLASS_IDS = {"disc": DISC, "square": SQUARE, "triangle": TRIANGLE, "star": STAR, "hexagon": HEXAGON}


@dataclasses.dataclass(frozen=True)
class Appearance:
    """How one object looks, independent of its pixel size.

    Attributes:
        label: class id (1 disc, 2 square, 3 triangle, 4 star; 5 hexagon, opt-in).
        colour_a / colour_b: the two RGB colours of its texture pattern.
        frequency: pattern repeats across the object's box (cycles).
        pattern_angle: orientation of stripes/checks, radians.
        pattern_phase: offset of the pattern, in cycles.
        shade_angle: direction of the light-to-dark shading, radians.
        star_inner: inner/outer radius ratio of a star's points.
    """

    label: int
    colour_a: tuple[int, int, int]
    colour_b: tuple[int, int, int]
    frequency: float
    pattern_angle: float
    pattern_phase: float
    shade_angle: float
    star_inner: float = 0.45


@dataclasses.dataclass(frozen=True)
class Sprite:
    """An object's pixels, sampled on a grid that covers its unrotated box.

    ``alpha`` is ``bool (Sy, Sx)``: which sprite cells belong to the shape;
    ``rgb`` is ``uint8 (Sy, Sx, 3)``. The grid spans the box
    ``[-w/2, w/2) x [-h/2, h/2)`` (object pixels at scale 1) of the object.
    ``area`` is the number of shape cells (``alpha.sum()``).
    """

    alpha: np.ndarray
    rgb: np.ndarray
    area: int


def label_id(label: str | int) -> int:
    """Class id of a class name or id; ``ValueError`` for anything else."""
    if isinstance(label, str) and label in CLASS_IDS:
        return CLASS_IDS[label]
    if isinstance(label, int) and not isinstance(label, bool) and 1 <= label <= len(CLASS_IDS):
        return label
    raise ValueError(
        f"unknown synthetic class {label!r}: use one of {sorted(CLASS_IDS)} or 1..{len(CLASS_IDS)}"
    )


def _hsv_to_rgb(h: float, s: float, v: float) -> tuple[int, int, int]:
    i = int(h * 6.0) % 6
    f = h * 6.0 - math.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    r, g, b = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]
    lo, hi = LEVEL_MARGIN, 255 - LEVEL_MARGIN
    return round(lo + (hi - lo) * r), round(lo + (hi - lo) * g), round(lo + (hi - lo) * b)


def _contrasting(rng: np.random.Generator, hue: float, value: float) -> tuple[int, int, int]:
    """A second colour far from (hue, value), so the pattern stays visible."""
    hue_b = (hue + rng.uniform(0.25, 0.75)) % 1.0
    value_b = value - rng.uniform(0.3, 0.5) if value > 0.6 else value + rng.uniform(0.3, 0.5)
    return _hsv_to_rgb(hue_b, rng.uniform(0.2, 1.0), float(np.clip(value_b, 0.1, 1.0)))


def make_appearance(
    rng: np.random.Generator, label: int, colour: tuple[int, int, int] | None = None
) -> Appearance:
    """Draw a random look for an object of class ``label``.

    Colours are drawn from the same distribution for every class, so a
    model has to learn shape and texture, not colour. ``colour`` (RGB)
    fixes the main colour; the second one is still drawn to contrast.
    """
    hue, sat, value = rng.uniform(0, 1), rng.uniform(0.3, 1.0), rng.uniform(0.3, 0.95)
    if colour is None:
        colour_a = _hsv_to_rgb(hue, sat, value)
    else:
        lo, hi = LEVEL_MARGIN, 255 - LEVEL_MARGIN
        r, g, b = (int(np.clip(c, lo, hi)) for c in colour)
        colour_a = (r, g, b)
        value = max(colour) / 255.0
    return Appearance(
        label=label,
        colour_a=colour_a,
        colour_b=_contrasting(rng, hue, value),
        frequency=float(rng.uniform(1.5, 3.5)),
        pattern_angle=float(rng.uniform(0, math.pi)),
        pattern_phase=float(rng.uniform(0, 1)),
        shade_angle=float(rng.uniform(0, 2 * math.pi)),
        star_inner=float(rng.uniform(0.38, 0.52)),
    )


def _polygon(label: int, star_inner: float) -> np.ndarray:
    """Vertices ``(K, 2)`` (u, v) in the box ``[-1, 1]^2``, v pointing down."""
    if label == TRIANGLE:
        return np.array([(0.0, -1.0), (1.0, 1.0), (-1.0, 1.0)])
    if label == HEXAGON:  # flat top and bottom; stretched to touch the box on every side
        angles = np.arange(6) * math.pi / 3
        return np.stack([np.cos(angles), np.sin(angles) / math.sin(math.pi / 3)], axis=1)
    angles = -math.pi / 2 + np.arange(10) * math.pi / 5
    radii = np.where(np.arange(10) % 2 == 0, 1.0, star_inner)
    pts = np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1)
    # Stretch the star so its points touch the box on every side.
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    return (pts - (lo + hi) / 2) * (2.0 / (hi - lo))


def _inside_polygon(u: np.ndarray, v: np.ndarray, poly: np.ndarray) -> np.ndarray:
    """Even-odd test of points ``(u, v)`` (broadcast arrays) against ``poly``."""
    inside = np.zeros(np.broadcast_shapes(u.shape, v.shape), dtype=bool)
    for (x1, y1), (x2, y2) in zip(poly, np.roll(poly, -1, axis=0), strict=True):
        if y1 == y2:
            continue
        crosses = (y1 > v) != (y2 > v)
        x_at = x1 + (v - y1) * (x2 - x1) / (y2 - y1)
        inside ^= crosses & (u < x_at)
    return inside


def _shape_mask(label: int, u: np.ndarray, v: np.ndarray, star_inner: float) -> np.ndarray:
    if label == DISC:
        return np.asarray(u * u + v * v < 1.0)
    if label == SQUARE:
        return np.ones(np.broadcast_shapes(u.shape, v.shape), dtype=bool)
    return _inside_polygon(u, v, _polygon(label, star_inner))


def _pattern(app: Appearance, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Which cells take ``colour_b`` (bool), per class: rings, checks, stripes, dots
    (and the hexagon's cross-hatch)."""
    c, s = math.cos(app.pattern_angle), math.sin(app.pattern_angle)
    pu, pv = c * u + s * v, -s * u + c * v
    f, phase = app.frequency, app.pattern_phase
    if app.label == DISC:
        return np.asarray(np.floor(np.sqrt(u * u + v * v) * f * 1.5 + phase) % 2 == 1)
    if app.label == SQUARE:
        return np.asarray((np.floor(pu * f + phase) + np.floor(pv * f + phase)) % 2 == 1)
    if app.label == TRIANGLE:
        return np.asarray(np.floor(pu * f * 1.5 + phase) % 2 == 1)
    if app.label == HEXAGON:  # a lattice of thin crossing lines
        return np.asarray(
            ((pu * f * 1.5 + phase) % 1.0 < 0.3) | ((pv * f * 1.5 + phase) % 1.0 < 0.3)
        )
    # star: a lattice of round dots
    du = (pu * f * 1.5 + phase) % 1.0 - 0.5
    dv = (pv * f * 1.5 + phase) % 1.0 - 0.5
    return np.asarray(du * du + dv * dv < 0.09)


def make_sprite(app: Appearance, width: int, height: int) -> Sprite:
    """Render ``app`` on a ``height x width`` grid covering the object's box.

    Args:
        app: the object's look.
        width / height: grid size in cells (>= 1); the caller picks it so
            that one cell is at most one frame pixel at the largest scale.
    """
    u = ((np.arange(width, dtype=np.float64) + 0.5) / width * 2.0 - 1.0)[None, :]
    v = ((np.arange(height, dtype=np.float64) + 0.5) / height * 2.0 - 1.0)[:, None]
    alpha = _shape_mask(app.label, u, v, app.star_inner)
    pick_b = _pattern(app, u, v)
    a = np.array(app.colour_a, dtype=np.float32)
    b = np.array(app.colour_b, dtype=np.float32)
    rgb = np.where(pick_b[..., None], b, a)
    shade = 1.0 + 0.12 * (math.cos(app.shade_angle) * u + math.sin(app.shade_angle) * v)
    rgb = rgb * shade[..., None].astype(np.float32)
    lo, hi = LEVEL_MARGIN, 255 - LEVEL_MARGIN
    rgb8 = np.clip(np.rint(rgb), lo, hi).astype(np.uint8)
    return Sprite(alpha=np.ascontiguousarray(alpha), rgb=rgb8, area=int(alpha.sum()))


def _bilinear_grid(grid: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Sample ``grid (gh, gw)`` at normalised ``ys`` (H,) and ``xs`` (W,) in [0, 1]."""
    gh, gw = grid.shape
    fy, fx = ys * (gh - 1), xs * (gw - 1)
    y0 = np.clip(np.floor(fy).astype(np.int64), 0, gh - 2)
    x0 = np.clip(np.floor(fx).astype(np.int64), 0, gw - 2)
    wy, wx = (fy - y0)[:, None], (fx - x0)[None, :]
    top = grid[y0][:, x0] * (1 - wx) + grid[y0][:, x0 + 1] * wx
    bottom = grid[y0 + 1][:, x0] * (1 - wx) + grid[y0 + 1][:, x0 + 1] * wx
    return np.asarray(top * (1 - wy) + bottom * wy)


def make_background(rng: np.random.Generator, height: int, width: int, pad: int = 0) -> np.ndarray:
    """A textured, muted background ``uint8 (height + 2 pad, width + 2 pad, 3)``.

    A colour gradient, value noise at four scales, a faint tile grid and a
    few darker or lighter patches. Built in normalised coordinates (the
    central ``height x width`` crop spans ``[0, 1]^2``), so the picture is
    the same at any resolution of the same aspect ratio.
    """
    unit = float(min(height, width))
    ys = (np.arange(height + 2 * pad) - pad + 0.5) / height
    xs = (np.arange(width + 2 * pad) - pad + 0.5) / width
    aspect = width / height
    hue = rng.uniform(0, 1)
    c0 = np.array(_hsv_to_rgb(hue, rng.uniform(0.05, 0.3), rng.uniform(0.3, 0.5)), np.float32)
    c1 = np.array(
        _hsv_to_rgb((hue + rng.uniform(-0.15, 0.15)) % 1, rng.uniform(0.05, 0.3), 0.7), np.float32
    )
    angle = rng.uniform(0, 2 * math.pi)
    ramp = (math.cos(angle) * (xs[None, :] - 0.5) + math.sin(angle) * (ys[:, None] - 0.5)) + 0.5
    img = c0 + (c1 - c0) * np.clip(ramp, 0, 1)[..., None].astype(np.float32)
    light = np.zeros((ys.size, xs.size), dtype=np.float64)
    # Value noise on grids spanning [-0.25, 1.25] (room for a shaking crop).
    sy, sx = (ys + 0.25) / 1.5, (xs + 0.25) / 1.5
    for cells, amp in ((3, 0.12), (8, 0.08), (20, 0.05), (50, 0.03)):
        gh, gw = round(cells * 1.5) + 1, round(cells * 1.5 * aspect) + 1
        grid = rng.uniform(-1, 1, size=(gh, gw))
        light += amp * _bilinear_grid(grid, sy, sx)
    for _ in range(int(rng.integers(3, 7))):
        x0, y0 = rng.uniform(-0.1, 0.9), rng.uniform(-0.1, 0.9)
        pw, ph = rng.uniform(0.1, 0.4), rng.uniform(0.1, 0.4)
        inside = ((ys >= y0) & (ys < y0 + ph))[:, None] & ((xs >= x0) & (xs < x0 + pw))[None, :]
        light += np.where(inside, rng.uniform(-0.15, 0.15), 0.0)
    spacing = rng.uniform(0.1, 0.22) * unit
    thick = max(1.0, 0.006 * unit)
    gx = ((xs * width) % spacing) < thick
    gy = ((ys * height) % spacing) < thick
    light -= 0.1 * (gx[None, :] | gy[:, None])
    img = img * (1.0 + light[..., None]).astype(np.float32)
    lo, hi = LEVEL_MARGIN, 255 - LEVEL_MARGIN
    return np.ascontiguousarray(np.clip(np.rint(img), lo, hi).astype(np.uint8))


def make_noise_field(rng: np.random.Generator, height: int, width: int, level: int) -> np.ndarray:
    """Sensor noise ``uint8 (height, width, 3)`` in ``[0, 2 level]``, centred on ``level``.

    Triangular distribution (sum of two uniforms), so most pixels move by
    less than ``level / 2``. Add it to a frame and subtract ``level``.
    """
    a = rng.integers(0, level + 1, size=(height, width, 3), dtype=np.uint8)
    b = rng.integers(0, level + 1, size=(height, width, 3), dtype=np.uint8)
    return np.ascontiguousarray(a + b)
