"""Rules over class regions: ``region`` (a track on a class) and ``coverage`` (a class in a zone).

Both read the frame's :class:`~streamseg.types.Regions` (the label map of a
semantic or panoptic model, ``TrackView.regions``) on the coarse grid the
zone rules use for masks (``MASK_GRID`` cells along the frame's longer side),
so their cost per frame follows that grid, not the frame. Rules of one frame
share its region grid (``TrackView.memo``).

* ``region``: what a thing is on is what lies around its mask (panoptic
  segments do not overlap, so a person on a railroad is surrounded by
  railroad, not covered by it). The measure is the share of a ring of
  ``margin`` pixels around the mask (grown mask minus mask) that is the
  class's region. ``on_region`` fires once the share has stayed at or above
  ``min_fraction`` for ``seconds``; ``off_region`` when it falls below
  ``min_fraction - band`` afterwards (or the track is dropped).
* ``coverage``: the share of a zone's cells that show the class: the region
  of a stuff class, or the masks of a thing class's tracks. ``coverage``
  fires when it has stayed above ``above`` (or below ``below``) for
  ``seconds``; ``coverage_end`` when it is back past the bound by ``band``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from streamseg.geometry import Polygon
from streamseg.track.rules.base import TIME_EPS, RuleBase, class_ids
from streamseg.track.rules.membership import MASK_GRID
from streamseg.track.view import TrackView
from streamseg.types import Event, mask_grid

if TYPE_CHECKING:
    from streamseg.track.rules.context import RuleContext

__all__ = ["CoverageRule", "RegionRule"]

log = logging.getLogger("streamseg.track.rules")
F64 = NDArray[np.float64]


def grid_stride(size: tuple[int, int]) -> int:
    """Pixels between grid samples for a frame of ``size`` ``(H, W)``."""
    return max(1, math.ceil(max(size) / MASK_GRID))


def region_grid(view: TrackView) -> torch.Tensor | None:
    """The view's label map on the grid (``int64 (h, w)``), once per frame; ``None``
    without regions."""
    regions = view.regions
    if regions is None:
        return None
    stride = grid_stride(view.frame.image_size)
    grid: torch.Tensor = view.memo(("region_grid", stride), lambda: regions.grid(stride))
    return grid


def track_grids(view: TrackView, idx: NDArray[np.int64]) -> torch.Tensor:
    """``bool (K, h, w)``: the masks of tracks ``idx`` on the grid (their boxes without masks)."""
    size = view.frame.image_size
    s = grid_stride(size)
    if view.masks is not None:
        return mask_grid(view.masks[torch.from_numpy(view.det_index[idx])], s)
    ys = torch.arange(s // 2, size[0], s, dtype=torch.float64) + 0.5
    xs = torch.arange(s // 2, size[1], s, dtype=torch.float64) + 0.5
    b = torch.from_numpy(view.boxes[idx])[:, :, None, None]
    inside_x = (xs[None, None, None, :] >= b[:, 0]) & (xs[None, None, None, :] < b[:, 2])
    inside_y = (ys[None, None, :, None] >= b[:, 1]) & (ys[None, None, :, None] < b[:, 3])
    return (inside_x & inside_y)[:, 0]


def _class_id(name: str, context: RuleContext, field: str) -> int:
    from streamseg.track.rules.engine import RuleError

    common = context.common
    try:
        ids = class_ids([name], common["class_names"], f"{common['name']}.{field}")
    except ValueError as exc:
        raise RuleError(str(exc).replace("in `classes`", f"in `{field}`"), field=field) from None
    assert ids is not None
    return int(ids[0])


class RegionRule(RuleBase):
    """``on_region`` / ``off_region`` of tracks around whose masks ``region`` lies.

    Args:
        region / label: the class's name and id.
        min_fraction: least share of the ring that is the region.
        seconds: how long the share must hold before ``on_region``.
        margin: ring width, pixels (at least one grid cell).
        band: hysteresis: ``off_region`` below ``min_fraction - band``.
        events: the kinds to emit.
    """

    def __init__(
        self,
        *,
        region: str,
        label: int,
        min_fraction: float,
        seconds: float,
        margin: float,
        band: float,
        events: list[str],
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.region, self.label = region, label
        self.min_fraction, self.seconds, self.margin, self.band = (
            min_fraction,
            seconds,
            margin,
            band,
        )
        self.kinds = set(events)
        self.since: dict[int, float] = {}  # track id -> when its share reached the bound
        self.fired: set[int] = set()  # tracks with an on_region of this visit
        self._warned = False

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> RegionRule:
        return cls(
            region=rule.region,
            label=_class_id(rule.region, context, "region"),
            min_fraction=rule.min_fraction,
            seconds=rule.seconds,
            margin=rule.margin,
            band=rule.band,
            events=list(rule.events),
            **context.common,
        )

    def fractions(self, view: TrackView, idx: NDArray[np.int64]) -> F64:
        """``(K,)`` share of each track's ring (see the module docstring) on the region."""
        labels = region_grid(view)
        if labels is None or len(idx) == 0:
            if labels is None and not self._warned:
                self._warned = True
                log.warning("alerts: rule %r needs a semantic or panoptic model", self.name)
            return np.zeros(len(idx))
        masks = track_grids(view, idx)
        r = max(1, round(self.margin / grid_stride(view.frame.image_size)))
        grown = F.max_pool2d(masks[:, None].float(), 2 * r + 1, stride=1, padding=r)[:, 0] > 0
        ring = grown & ~masks
        on = (ring & (labels == self.label)[None]).flatten(1).sum(1).double()
        out: F64 = (on / ring.flatten(1).sum(1).clamp(min=1).double()).numpy()
        return out

    def update(self, view: TrackView) -> list[Event]:
        idx = self.eligible(view)
        share = self.fractions(view, idx)
        now = view.frame.time
        ids = view.ids[idx]
        was_on = np.fromiter((t in self.since for t in ids.tolist()), bool, len(ids))
        bound = np.where(was_on, self.min_fraction - self.band, self.min_fraction)
        on = share >= bound - 1e-12
        events: list[Event] = []
        for k in np.flatnonzero(on | was_on).tolist():
            i, tid = int(idx[k]), int(ids[k])
            extra = {"region": self.region, "fraction": round(float(share[k]), 4)}
            if not on[k]:
                since = self.since.pop(tid)
                if tid in self.fired:
                    self.fired.discard(tid)
                    extra["seconds"] = round(now - since, 3)
                    events += self._emit("off_region", view, i, extra)
                continue
            since = self.since.setdefault(tid, now)
            if tid not in self.fired and now - since >= self.seconds - TIME_EPS:
                self.fired.add(tid)
                extra["seconds"] = round(now - since, 3)
                events += self._emit("on_region", view, i, extra)
        events += self._drop_removed(view)
        return events

    def _emit(self, kind: str, view: TrackView, i: int, extra: dict[str, Any]) -> list[Event]:
        if kind not in self.kinds or not self.cooled(int(view.ids[i]), kind, view.frame.time):
            return []
        return [self.event(kind, view, i, extra=extra)]

    def _drop_removed(self, view: TrackView) -> list[Event]:
        events = []
        for r, tid in enumerate(view.removed_ids.tolist()):
            since = self.since.pop(tid, None)
            if tid in self.fired and "off_region" in self.kinds and since is not None:
                extra = {
                    "region": self.region,
                    "reason": "lost",
                    "seconds": round(view.frame.time - since, 3),
                }
                events.append(self.removed_event("off_region", view, r, zone=None, extra=extra))
            self.fired.discard(tid)
        self.forget(view.removed_ids)
        return events


class CoverageRule(RuleBase):
    """``coverage`` / ``coverage_end`` of a class's share of ``zone`` (module docstring).

    Args:
        zone / polygon: the zone's name and its polygon in frame pixels.
        region / label: the class's name and id.
        above / below: the bound (one of them).
        seconds: how long the share must be past the bound before ``coverage``.
        band: hysteresis on the share for ``coverage_end``.
        events: the kinds to emit.
    """

    def __init__(
        self,
        *,
        zone: str,
        polygon: Polygon,
        region: str,
        label: int,
        above: float | None,
        below: float | None,
        seconds: float,
        band: float,
        events: list[str],
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.zone, self.polygon, self.region, self.label = zone, polygon, region, label
        self.above, self.below, self.seconds, self.band = above, below, seconds, band
        self.kinds = set(events)
        self.past_since: float | None = None  # when the share went past the bound
        self.active_since: float | None = None  # when coverage fired (until it ends)
        self.last_event: float | None = None
        self._raster: tuple[tuple[int, int], torch.Tensor] | None = None

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> CoverageRule:
        return cls(
            zone=rule.zone,
            polygon=context.polygon(rule.zone),
            region=rule.region,
            label=_class_id(rule.region, context, "region"),
            above=rule.above,
            below=rule.below,
            seconds=rule.seconds,
            band=rule.band,
            events=list(rule.events),
            **context.common,
        )

    def _zone(self, size: tuple[int, int]) -> torch.Tensor:
        if self._raster is None or self._raster[0] != size:
            raster = torch.from_numpy(self.polygon.raster(size, grid_stride(size)))
            self._raster = (size, raster)
        return self._raster[1]

    def fraction(self, view: TrackView) -> float:
        """The share of the zone's grid cells that show the class now."""
        zone = self._zone(view.frame.image_size)
        labels = region_grid(view)
        covered = torch.zeros_like(zone) if labels is None else labels == self.label
        mine = self.eligible(view)
        mine = mine[view.labels[mine] == self.label]
        if len(mine):
            covered = covered | track_grids(view, mine).any(0)
        cells = int(zone.sum())
        return float((covered & zone).sum()) / cells if cells else 0.0

    def _past(self, share: float, active: bool) -> bool:
        slack = self.band if active else 0.0
        if self.above is not None:
            return share > self.above - slack
        assert self.below is not None
        return share < self.below + slack

    def update(self, view: TrackView) -> list[Event]:
        share = self.fraction(view)
        now = view.frame.time
        bound = {"above": self.above} if self.above is not None else {"below": self.below}
        extra: dict[str, Any] = {"region": self.region, "fraction": round(share, 4), **bound}
        if self.active_since is not None:
            if self._past(share, active=True):
                return []
            extra["seconds"] = round(now - self.active_since, 3)
            self.active_since = self.past_since = None
            return self._emit("coverage_end", view, extra)
        if not self._past(share, active=False):
            self.past_since = None
            return []
        self.past_since = now if self.past_since is None else self.past_since
        if now - self.past_since < self.seconds - TIME_EPS:
            return []
        if self.last_event is not None and now - self.last_event < self.cooldown - TIME_EPS:
            return []
        self.active_since = self.last_event = now
        extra["seconds"] = round(now - self.past_since, 3)
        return self._emit("coverage", view, extra)

    def _emit(self, kind: str, view: TrackView, extra: dict[str, Any]) -> list[Event]:
        if kind not in self.kinds:
            return []
        event = self.event(kind, view, None, zone=self.zone, extra=extra)
        return [dataclasses.replace(event, label=self.label, label_name=self.region)]
