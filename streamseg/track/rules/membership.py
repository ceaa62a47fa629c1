"""Is a track in a zone? By an anchor point of its box or by the share of its mask.

Both ways use hysteresis so that an object standing on the edge does not
flicker in and out:

* anchor: the signed distance ``depth`` of the anchor to the zone's
  boundary (pixels, ``> 0`` inside). Outside -> inside when
  ``depth >= band``; inside -> outside when ``depth < 0`` and
  ``-depth >= band``. A track seen for the first time is inside when
  ``depth >= 0`` (boundary included).
* mask: the fraction ``f`` of the mask's pixels in the zone (on a grid of
  ``MASK_GRID`` cells along the frame's longer side). In when
  ``f >= mask_fraction``, out when ``f < mask_fraction - mask_band``.
  Frames without masks fall back to the anchor test.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from typing import ClassVar

import numpy as np
import torch
from numpy.typing import NDArray

from streamseg.geometry import EPS, Polygon
from streamseg.track.view import TrackView
from streamseg.types import mask_grid

__all__ = ["MASK_GRID", "Membership", "pick_rows"]

log = logging.getLogger("streamseg.track.rules")

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
Bool = NDArray[np.bool_]

MASK_GRID = 160
UNKNOWN, OUT, IN = -1, 0, 1
FEW = 16  # up to this many points, exact depths in plain Python (numpy's per-call cost dominates)


_RANGE: I64 = np.zeros(0, np.int64)


def positions(n: int) -> I64:
    """``np.arange(n)`` as a read-only view of one kept array.

    ``np.arange`` gives up the GIL to fill its array, even for a handful of
    values, and in ``serve`` another thread then keeps it for a whole
    switch interval; the kept array grows (by doubling) only when a frame
    has more tracks than any before.
    """
    global _RANGE
    if n > len(_RANGE):
        _RANGE = np.arange(max(n, 2 * len(_RANGE), 64), dtype=np.int64)
        _RANGE.flags.writeable = False
    return _RANGE[:n]


class Membership:
    """Inside/outside decisions for one zone and one way of measuring.

    Args:
        polygon: the zone in frame pixels.
        anchor: box anchor name (``bottom_center``, ...).
        band: anchor hysteresis, pixels.
        mask_fraction: measure by mask share instead (``None``: by anchor).
        mask_band: hysteresis on the share when leaving.
    """

    def __init__(
        self,
        *,
        polygon: Polygon,
        anchor: str,
        band: float,
        mask_fraction: float | None,
        mask_band: float,
    ) -> None:
        self.polygon = polygon
        self.anchor = anchor
        self.band = band
        self.mask_fraction = mask_fraction
        self.mask_band = mask_band
        self._raster: tuple[tuple[int, int], int, torch.Tensor] | None = None
        self._cells: _CellMap | None = None
        self._warned = False
        # Least depth (or mask share) to be inside, indexed by previous state + 1:
        # unknown (boundary included), out (``band`` inside), in (less than
        # ``band`` outside: the next float above ``-band``).
        stay = 0.0 if band <= 0 else float(np.nextafter(-band, np.inf))
        self._least_depth: F64 = np.array([0.0, band, stay])
        share = mask_fraction if mask_fraction is not None else 0.0
        self._least_share: F64 = np.array([share, share, share - mask_band])

    def step(self, view: TrackView, idx: I64, prev: NDArray[np.int8]) -> Bool:
        """New inside state ``(K,)`` of tracks ``idx`` of ``view`` given ``prev`` (-1/0/1)."""
        # Each previous state (unknown, out, in) has its own least value to be inside.
        if self.mask_fraction is not None and view.masks is not None:
            least = self._least_share
            out: Bool = self._fractions(view, idx) >= least[prev + 1]
            return out
        if self.mask_fraction is not None and not self._warned:
            self._warned = True
            log.warning(
                "alerts: zone membership by mask, but frames have no masks: "
                "using the box anchor instead"
            )
        return self._by_anchor(view.anchors(self.anchor), idx, prev)

    def born_inside(self, view: TrackView, idx: I64) -> Bool:
        """``(K,)``: the track's first observed box had its anchor in the zone."""
        return self.contains(pick_rows(view.anchors(self.anchor, "first_boxes"), idx))

    def contains(self, points: F64) -> Bool:
        """``(K,)``: ``Polygon.contains`` (boundary included), exact depths only near it.

        The test of a track seen for the first time: inside at depth 0 or more.
        """
        n = len(points)
        return self._by_anchor(points, positions(n), np.full(n, UNKNOWN, np.int8))

    def _cell_map(self) -> _CellMap:
        if self._cells is None:
            self._cells = _CellMap.of(self.polygon, self.band)
        return self._cells

    def _by_anchor(self, anchors: F64, idx: I64, prev: NDArray[np.int8]) -> Bool:
        """Inside states of ``anchors[idx]`` by depth, exact depths only near the boundary.

        A point in a cell of the zone's :class:`_CellMap` that lies wholly
        ``band`` deep inside (or ``band`` beyond the boundary) is in (or out)
        whatever its previous state; only points in cells near the boundary
        get their exact depth.
        """
        cells = self._cell_map()
        points = anchors if len(idx) == len(anchors) else anchors[idx]
        sure = cells.classify(points)
        out: Bool = sure == IN
        unsure = (sure == UNKNOWN).nonzero()[0]
        if len(unsure) == 0:
            return out
        # Rows picked column by column: numpy gives up the GIL to pick rows of a
        # 2-D array (however few), and in serve another thread then keeps it.
        xs, ys = points[:, 0][unsure], points[:, 1][unsure]  # as pick_rows
        if len(unsure) > FEW:
            depth = self.polygon.depth(np.stack((xs, ys), axis=1))
            out[unsure] = depth >= self._least_depth[prev[unsure] + 1]
        else:
            least = self._least_depth.tolist()
            for k, x, y, p in zip(
                unsure.tolist(), xs.tolist(), ys.tolist(), prev[unsure].tolist(), strict=True
            ):
                out[k] = cells.depth(x, y) >= least[p + 1]
        return out

    def _fractions(self, view: TrackView, idx: I64) -> F64:
        assert view.masks is not None
        size = view.frame.image_size
        if self._raster is None or self._raster[0] != size:
            stride = max(1, math.ceil(max(size) / MASK_GRID))
            zone = torch.from_numpy(self.polygon.raster(size, stride))
            self._raster = (size, stride, zone)
        _, s, zone = self._raster
        grid = mask_grid(view.masks[torch.from_numpy(view.det_index[idx])], s)
        area = grid.flatten(1).sum(1).double()
        inside = (grid & zone).flatten(1).sum(1).double()
        frac = torch.where(area > 0, inside / area.clamp(min=1), torch.zeros_like(area))
        out: F64 = frac.numpy()
        return out


def pick_rows(points: F64, idx: I64) -> F64:
    """``points[idx]`` for ``points (K, 2)``, picked column by column.

    numpy gives up the GIL to pick rows of a 2-D array, however few, and in
    ``serve`` another thread of the process then keeps it for a whole switch
    interval; picking from each column (1-D) keeps it.
    """
    return np.stack((points[:, 0][idx], points[:, 1][idx]), axis=1)


class _CellMap:
    """Which square cells around a polygon lie wholly in or out of it, with ``band`` to spare.

    Cells of ``CELL`` pixels cover the polygon's bounding box grown by
    ``band`` and one cell. A cell is ``IN`` when its centre's depth is at
    least ``band`` plus the cell's half diagonal (so every point of it is
    ``band`` deep: depth changes no faster than distance), ``OUT`` when at
    most minus that, else ``UNKNOWN``. A border of ``OUT`` cells stands for
    everything beyond.
    """

    CELL = 6.0  # pixels
    MAX_CELLS = 256  # per side; larger zones get larger cells
    MARGIN = 1e-3  # pixels of slack for float rounding

    KEEP = 64  # maps kept for reuse, most recently used

    _made: ClassVar[OrderedDict[tuple[bytes, float], _CellMap]] = OrderedDict()
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, polygon: Polygon, band: float) -> _CellMap:
        """The map of ``polygon``'s vertices and ``band``, built once: rules on one
        zone share it, and so do cameras with the same zone (and a camera whose
        rules are rebuilt)."""
        key = (polygon.a.tobytes(), float(band))
        with cls._lock:
            made = cls._made.get(key)
            if made is not None:
                cls._made.move_to_end(key)
                return made
        made = cls(polygon, band)
        with cls._lock:
            cls._made[key] = made
            while len(cls._made) > cls.KEEP:
                cls._made.popitem(last=False)
        return made

    def __init__(self, polygon: Polygon, band: float) -> None:
        extent = float((polygon.hi - polygon.lo).max()) + 2 * band
        self.cell = max(self.CELL, extent / (self.MAX_CELLS - 4))
        self.origin = polygon.lo - band - self.cell
        nx, ny = np.ceil((polygon.hi + band + self.cell - self.origin) / self.cell).astype(int)
        xs = self.origin[0] + (np.arange(nx) + 0.5) * self.cell
        ys = self.origin[1] + (np.arange(ny) + 0.5) * self.cell
        gx, gy = np.meshgrid(xs, ys)
        depth = polygon.depth(np.stack((gx.ravel(), gy.ravel()), axis=1)).reshape(ny, nx)
        sure = band + self.cell * math.sqrt(0.5) + self.MARGIN
        grid = np.full((ny + 2, nx + 2), OUT, np.int8)  # with the border
        inner = grid[1:-1, 1:-1]
        inner[:] = UNKNOWN
        inner[depth >= sure] = IN
        inner[depth <= -sure] = OUT
        self.flat = grid.ravel()
        # Edges as floats: (ax, ay, bx, by, bx - ax, by - ay, squared length).
        self.edges = [
            (ax, ay, bx, by, bx - ax, by - ay, max((bx - ax) ** 2 + (by - ay) ** 2, 1e-300))
            for (ax, ay), (bx, by) in zip(polygon.a.tolist(), polygon.b.tolist(), strict=True)
        ]
        self.last = np.array([nx, ny], np.float64)  # cell index of the far border
        # Flat index of cell (x, y) in the bordered grid: x + 1 + (y + 1) * (nx + 2).
        self.step = np.array([1.0, nx + 2.0])
        self.offset = float(nx + 3)

    def classify(self, points: F64) -> NDArray[np.int8]:
        """``(K,)`` IN, OUT or UNKNOWN (exact test needed) for ``points (K, 2)``.

        Column by column: numpy gives up the GIL for an operation on more
        than 500 elements, and ``K`` points are ``2 K`` of them.
        """
        (ox, oy), (lx, ly), row = self.origin.tolist(), self.last.tolist(), float(self.step[1])
        scale = 1.0 / self.cell
        cx = np.floor((points[:, 0] - ox) * scale)
        cy = np.floor((points[:, 1] - oy) * scale)
        np.clip(cx, -1.0, lx, out=cx)
        np.clip(cy, -1.0, ly, out=cy)
        cy *= row
        cx += cy
        cx += self.offset
        out: NDArray[np.int8] = self.flat[cx.astype(np.intp)]
        return out

    def depth(self, x: float, y: float) -> float:
        """``Polygon.depth`` of one point, the same float operations in plain Python."""
        nearest = math.inf
        odd = False
        for ax, ay, bx, by, abx, aby, length2 in self.edges:
            t = ((x - ax) * abx + (y - ay) * aby) / length2
            t = 0.0 if t < 0.0 else 1.0 if t > 1.0 else t
            dx, dy = x - (ax + t * abx), y - (ay + t * aby)
            nearest = min(nearest, math.sqrt(dx * dx + dy * dy))
            if (ay > y) != (by > y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
                odd = not odd
        return nearest if odd or nearest <= EPS else -nearest
