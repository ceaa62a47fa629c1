"""Stuff for synthetic scenes: ground, a road and water patches, with their exact label map.

A scene made with ``stuff=True`` (``synthetic://?stuff=1``) lays its moving
objects over regions of three "stuff" classes instead of a plain textured
background: ``ground`` everywhere, a ``road`` band crossing the frame at a
random angle, and one to three ``water`` patches (ellipses, over the road
where they meet). Each class has its own look (ground: the muted texture of
plain scenes; road: dark asphalt with lane markings; water: blue ripples),
so a model can learn them; colours vary per seed within each look.

Like the rest of a scene it is built once, in normalised coordinates (the
same picture at any resolution of one aspect ratio), and the label map says
exactly which class every background pixel shows.
"""

from __future__ import annotations

import math

import numpy as np

from streamseg.synthetic.sprites import LEVEL_MARGIN, make_background

__all__ = ["STUFF_CLASS_NAMES", "make_stuff"]

STUFF_CLASS_NAMES = ("ground", "road", "water")
GROUND, ROAD, WATER = 0, 1, 2  # positions in STUFF_CLASS_NAMES


def _grid(height: int, width: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised pixel-centre coordinates ``ys (H+2p, 1)``, ``xs (1, W+2p)``."""
    ys = ((np.arange(height + 2 * pad) - pad + 0.5) / height)[:, None]
    xs = ((np.arange(width + 2 * pad) - pad + 0.5) / width)[None, :]
    return ys, xs


def _road(
    rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray, aspect: float
) -> tuple[np.ndarray, np.ndarray]:
    """The road's pixels (bool) and its colours (float RGB) over the whole grid."""
    angle = rng.uniform(0, math.pi)
    cx, cy = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7)
    half = rng.uniform(0.09, 0.15)  # of the frame's height
    # Signed distance across the road and position along it, in frame heights.
    dx, dy = (xs - cx) * aspect, ys - cy
    across = -math.sin(angle) * dx + math.cos(angle) * dy
    along = math.cos(angle) * dx + math.sin(angle) * dy
    inside = np.abs(across) < half
    grey = rng.uniform(0.22, 0.34) * 255
    rgb = np.full((*inside.shape, 3), grey, np.float32) + rng.uniform(-8, 8, 3).astype(np.float32)
    grain = np.sin(37.0 * along) * np.sin(53.0 * across)
    rgb += (6.0 * grain)[..., None].astype(np.float32)
    dashes = (np.abs(across) < 0.012) & (np.mod(along * 6.0, 1.0) < 0.5)
    edges = np.abs(np.abs(across) - half * 0.88) < 0.008
    rgb[dashes | edges] = rng.uniform(200, 235)
    return inside, rgb


def _water(
    rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray, aspect: float
) -> tuple[np.ndarray, np.ndarray]:
    """Water patches' pixels (bool) and their colours (float RGB) over the whole grid."""
    inside = np.zeros(np.broadcast_shapes(ys.shape, xs.shape), dtype=bool)
    for _ in range(int(rng.integers(1, 4))):
        cx, cy = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9)
        rx, ry = rng.uniform(0.08, 0.2) / aspect, rng.uniform(0.08, 0.2)
        turn = rng.uniform(0, math.pi)
        u, v = xs - cx, ys - cy
        a = (math.cos(turn) * u + math.sin(turn) * v) / rx
        b = (-math.sin(turn) * u + math.cos(turn) * v) / ry
        inside |= a * a + b * b < 1.0
    hue_rgb = np.array([rng.uniform(20, 60), rng.uniform(90, 140), rng.uniform(170, 220)])
    phase = rng.uniform(0, 2 * math.pi)
    ripple = np.sin(60.0 * ys + 9.0 * np.sin(14.0 * xs * aspect) + phase)
    rgb = hue_rgb.astype(np.float32) * (1.0 + 0.12 * ripple)[..., None].astype(np.float32)
    return inside, rgb


def make_stuff(
    rng: np.random.Generator, height: int, width: int, pad: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The stuff background of a scene and its labels.

    Returns:
        ``image``: ``uint8 (H + 2 pad, W + 2 pad, 3)`` (colours kept in
        ``[LEVEL_MARGIN, 255 - LEVEL_MARGIN]``, as every scene pixel), and
        ``labels``: ``int64`` of the same size, the index into
        :data:`STUFF_CLASS_NAMES` of each pixel.
    """
    image = make_background(rng, height, width, pad).astype(np.float32)
    ys, xs = _grid(height, width, pad)
    aspect = width / height
    labels = np.full(image.shape[:2], GROUND, dtype=np.int64)
    for label, make in ((ROAD, _road), (WATER, _water)):
        inside, rgb = make(rng, ys, xs, aspect)
        labels[inside] = label
        image[inside] = rgb[inside]
    lo, hi = LEVEL_MARGIN, 255 - LEVEL_MARGIN
    return np.ascontiguousarray(np.clip(np.rint(image), lo, hi).astype(np.uint8)), labels
