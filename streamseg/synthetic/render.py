"""Compositing synthetic frames: paste sprites back to front, read off exact ground truth.

Each object's sprite is sampled with nearest-neighbour lookups at the frame
pixels its (scaled, rotated) box covers: pixel ``(x, y)`` (centre
``(x + 0.5, y + 0.5)``) takes the sprite cell under it, and belongs to the
object when that cell is inside the shape. Objects are painted from the
farthest to the nearest while an id map records which object owns every
pixel, so the visible masks are exactly the pixels each object painted last
and are disjoint by construction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from streamseg.synthetic.motion import Placement
from streamseg.synthetic.sprites import Sprite

__all__ = ["Patch", "Rendered", "composite", "sample_sprite"]


@dataclasses.dataclass(frozen=True)
class Patch:
    """An object's pixels inside the frame.

    ``rows``/``cols`` slice the frame; ``mask`` ``bool (Hr, Wr)`` marks the
    shape's pixels there and ``rgb`` ``uint8 (Hr, Wr, 3)`` their colours;
    ``area`` counts the shape's pixels as if the frame had no border.
    """

    rows: slice
    cols: slice
    mask: np.ndarray
    rgb: np.ndarray
    area: int


@dataclasses.dataclass(frozen=True)
class Rendered:
    """Ground truth of one frame, ``N`` visible objects sorted by track id.

    ``boxes`` float32 ``(N, 4)`` xyxy (x2/y2 = last pixel + 1), ``labels``
    and ``track_ids`` int64 ``(N,)``, ``masks`` bool ``(N, H, W)``,
    ``visibility`` float32 ``(N,)`` (visible pixels / shape pixels),
    ``covered`` bool ``(H, W)``: pixels any object painted (kept or not).
    """

    boxes: np.ndarray
    labels: np.ndarray
    track_ids: np.ndarray
    masks: np.ndarray
    visibility: np.ndarray
    covered: np.ndarray


def _span(centre: float, extent: float, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixels covered by a box of ``extent`` px around ``centre`` and their cell indices."""
    first = math.floor(centre - extent / 2.0)
    last = math.ceil(centre + extent / 2.0)
    px = np.arange(first, last + 1)
    f = (px + 0.5 - centre) * (cells / extent) + cells / 2.0
    inside = (f >= 0) & (f < cells)
    return px[inside], np.floor(f[inside]).astype(np.intp)


def _clip(px: np.ndarray, limit: int) -> slice:
    """Positions of ``px`` (contiguous, increasing) that fall in ``[0, limit)``."""
    if px.size == 0:
        return slice(0, 0)
    lo = max(0, -int(px[0]))
    hi = px.size - max(0, int(px[-1]) - (limit - 1))
    return slice(lo, max(lo, hi))


def _sample_upright(p: Placement, sprite: Sprite, height: int, width: int) -> Patch | None:
    sy, sx = sprite.alpha.shape
    xs, ix = _span(p.cx, p.width * p.scale, sx)
    ys, iy = _span(p.cy, p.height * p.scale, sy)
    keep_x, keep_y = _clip(xs, width), _clip(ys, height)
    if keep_x.stop <= keep_x.start or keep_y.stop <= keep_y.start:
        return None
    clipped = keep_x.stop - keep_x.start < xs.size or keep_y.stop - keep_y.start < ys.size
    ix_in, iy_in = ix[keep_x], iy[keep_y]
    mask = sprite.alpha[iy_in[:, None], ix_in[None, :]]
    area = int(sprite.alpha[iy[:, None], ix[None, :]].sum()) if clipped else int(mask.sum())
    return Patch(
        rows=slice(int(ys[keep_y.start]), int(ys[keep_y.stop - 1]) + 1),
        cols=slice(int(xs[keep_x.start]), int(xs[keep_x.stop - 1]) + 1),
        mask=mask,
        rgb=sprite.rgb[iy_in[:, None], ix_in[None, :]],
        area=area,
    )


def _sample_rotated(p: Placement, sprite: Sprite, height: int, width: int) -> Patch | None:
    sy, sx = sprite.alpha.shape
    c, s = math.cos(p.angle), math.sin(p.angle)
    w, h = p.width * p.scale, p.height * p.scale
    ex, ey = (abs(c) * w + abs(s) * h) / 2.0, (abs(s) * w + abs(c) * h) / 2.0
    x0, x1 = math.floor(p.cx - ex), math.ceil(p.cx + ex) + 1
    y0, y1 = math.floor(p.cy - ey), math.ceil(p.cy + ey) + 1
    cx0, cx1, cy0, cy1 = max(x0, 0), min(x1, width), max(y0, 0), min(y1, height)
    if cx1 <= cx0 or cy1 <= cy0:
        return None
    dx = (np.arange(x0, x1) + (0.5 - p.cx)).astype(np.float32)[None, :]
    dy = (np.arange(y0, y1) + (0.5 - p.cy)).astype(np.float32)[:, None]
    kx, ky = sx / w, sy / h
    fx = np.float32(c * kx) * dx + np.float32(s * kx) * dy + np.float32(sx / 2.0)
    fy = np.float32(-s * ky) * dx + np.float32(c * ky) * dy + np.float32(sy / 2.0)
    valid = (fx >= 0) & (fx < sx) & (fy >= 0) & (fy < sy)
    ix = np.clip(fx.astype(np.intp), 0, sx - 1)
    iy = np.clip(fy.astype(np.intp), 0, sy - 1)
    full = sprite.alpha[iy, ix] & valid
    r, q = slice(cy0 - y0, cy1 - y0), slice(cx0 - x0, cx1 - x0)
    return Patch(
        rows=slice(cy0, cy1),
        cols=slice(cx0, cx1),
        mask=full[r, q],
        rgb=sprite.rgb[iy[r, q], ix[r, q]],
        area=int(full.sum()),
    )


def sample_sprite(p: Placement, sprite: Sprite, height: int, width: int) -> Patch | None:
    """The pixels of object ``p`` in a ``height x width`` frame, or ``None`` if none."""
    if p.angle == 0.0:
        return _sample_upright(p, sprite, height, width)
    return _sample_rotated(p, sprite, height, width)


def composite(
    image: np.ndarray,
    placements: Sequence[Placement],
    sprite_for: Callable[[Placement], Sprite],
    *,
    min_pixels: int,
) -> Rendered:
    """Paint ``placements`` into ``image`` (``uint8 (H, W, 3)``, in place) and return the gt.

    Objects with fewer than ``min_pixels`` visible pixels are painted but
    left out of the ground truth.
    """
    height, width = image.shape[:2]
    owner = np.full((height, width), -1, dtype=np.int16)
    drawn: list[tuple[int, Patch]] = []
    order = sorted(
        range(len(placements)), key=lambda i: (-placements[i].depth, placements[i].order)
    )
    for i in order:
        patch = sample_sprite(placements[i], sprite_for(placements[i]), height, width)
        if patch is None:
            continue
        np.copyto(image[patch.rows, patch.cols], patch.rgb, where=patch.mask[..., None])
        np.copyto(owner[patch.rows, patch.cols], np.int16(i), where=patch.mask)
        drawn.append((i, patch))
    kept: list[tuple[int, Patch, np.ndarray, int]] = []
    for i, patch in drawn:
        visible = owner[patch.rows, patch.cols] == i
        count = int(np.count_nonzero(visible))
        if count >= min_pixels:
            kept.append((i, patch, visible, count))
    kept.sort(key=lambda item: placements[item[0]].track_id)
    n = len(kept)
    boxes = np.zeros((n, 4), dtype=np.float32)
    masks = np.zeros((n, height, width), dtype=bool)
    visibility = np.zeros((n,), dtype=np.float32)
    for j, (_i, patch, visible, count) in enumerate(kept):
        masks[j, patch.rows, patch.cols] = visible
        rows = np.flatnonzero(visible.any(axis=1))
        cols = np.flatnonzero(visible.any(axis=0))
        boxes[j] = (
            patch.cols.start + cols[0],
            patch.rows.start + rows[0],
            patch.cols.start + cols[-1] + 1,
            patch.rows.start + rows[-1] + 1,
        )
        visibility[j] = min(1.0, count / max(patch.area, 1))
    return Rendered(
        boxes=boxes,
        labels=np.array([placements[k[0]].label for k in kept], dtype=np.int64),
        track_ids=np.array([placements[k[0]].track_id for k in kept], dtype=np.int64),
        masks=masks,
        visibility=visibility,
        covered=owner >= 0,
    )
