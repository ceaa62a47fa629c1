"""The config models of zones, lines and each rule kind of the ``alerts:`` section.

:mod:`streamseg.track.rule_kinds` pairs each rule model with the rule class that
runs it (``RULE_KINDS``); :mod:`streamseg.track.alerts` holds the per-camera section
(``CameraAlerts``) that names zones and lines and lists rules. Geometry is
in frame pixels (x right, y down) or normalised to the frame (``[0, 1]``
on both axes); times are seconds of capture time.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from streamseg.configbase.base import StrictModel
from streamseg.geometry import Anchor, Coordinates, Point, polygon_area, self_crossing

__all__ = [
    "CoverageRule",
    "CrowdingRule",
    "DwellRule",
    "LineConfig",
    "LineRule",
    "Membership",
    "Name",
    "RegionRule",
    "RuleFields",
    "ZoneConfig",
    "ZoneRule",
    "check_finite",
]

ZoneKind = Literal["enter", "exit"]
LineKind = Literal["line_in", "line_out"]
CrowdKind = Literal["crowding", "crowding_end"]
RegionKind = Literal["on_region", "off_region"]
CoverageKind = Literal["coverage", "coverage_end"]
_ZONE_KINDS: tuple[ZoneKind, ...] = ("enter", "exit")
_LINE_KINDS: tuple[LineKind, ...] = ("line_in", "line_out")
_CROWD_KINDS: tuple[CrowdKind, ...] = ("crowding", "crowding_end")
_REGION_KINDS: tuple[RegionKind, ...] = ("on_region", "off_region")
_COVERAGE_KINDS: tuple[CoverageKind, ...] = ("coverage", "coverage_end")
Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\s].*$")]


class ZoneConfig(StrictModel):
    """A polygon zone: at least 3 vertices ``[x, y]``, simple (edges do not cross)."""

    polygon: list[Point] = Field(min_length=3)
    coordinates: Coordinates | None = Field(
        default=None, description="pixels or normalized; default: the camera's `coordinates`"
    )

    @field_validator("polygon")
    @classmethod
    def _check_polygon(cls, value: list[Point]) -> list[Point]:
        check_finite(value)
        # A bow tie has no (signed) area either: it is told as crossing itself,
        # and "no area" kept for points that truly lie on one line.
        crossing = None if _on_one_line(value) else self_crossing(value)
        if crossing is None and polygon_area(value) <= 1e-12:
            raise ValueError("the polygon has no area (are its points on one line?)")
        if crossing is not None:
            i, j = crossing
            raise ValueError(
                f"the polygon crosses itself (edges {i}-{i + 1} and {j}-{(j + 1) % len(value)}); "
                "list the vertices in order around the zone"
            )
        return value


def _on_one_line(points: list[Point]) -> bool:
    """Whether every point lies on one straight line (or they are all one point)."""
    x0, y0 = points[0]
    fx, fy = max(points, key=lambda p: abs(p[0] - x0) + abs(p[1] - y0))  # the farthest
    dx, dy = fx - x0, fy - y0
    scale = max(abs(dx), abs(dy), 1e-300)
    return all(abs(dx * (y - y0) - dy * (x - x0)) <= 1e-9 * scale * scale for x, y in points)


class LineConfig(StrictModel):
    """A counting line: a segment from ``points[0]`` to ``points[1]``.

    ``in_side`` names the side of the directed segment (as seen on screen,
    looking from ``points[0]`` to ``points[1]``) that a crossing *into*
    counts as ``line_in``; crossing the other way is ``line_out``.
    """

    points: tuple[Point, Point]
    in_side: Literal["left", "right"] = "right"
    coordinates: Coordinates | None = None

    @field_validator("points")
    @classmethod
    def _check_points(cls, value: tuple[Point, Point]) -> tuple[Point, Point]:
        check_finite(list(value))
        (x1, y1), (x2, y2) = value
        if math.hypot(x2 - x1, y2 - y1) <= 1e-9:
            raise ValueError("the line's two points are the same point")
        return value


class RuleFields(StrictModel):
    name: Name
    classes: list[str] = Field(
        default_factory=list, description="class names that trigger the rule; empty: all"
    )
    min_score: float = Field(default=0.0, ge=0, le=1, description="least smoothed track score")
    cooldown: float = Field(
        default=0.0, ge=0, description="seconds before the same track re-triggers the same event"
    )
    include_mask: bool = Field(default=True, description="attach the COCO RLE mask to events")

    def uses_masks(self) -> bool:
        """Whether this entry reads the tracks' masks: its events carry them
        (``include_mask``), or its zone test measures by mask share
        (``mask_fraction``). A kind that always reads them says so in its row
        (``RuleKind.masks``)."""
        return self.include_mask or (
            isinstance(self, Membership) and self.mask_fraction is not None
        )

    def region_class(self) -> str | None:
        """The class this entry names in ``region`` (checked against the model's classes,
        like ``classes``); ``None`` for kinds without one."""
        return None

    def zone_name(self) -> str | None:
        """The zone this entry names (checked against the camera's ``zones``);
        ``None`` for kinds without one."""
        return None

    def line_name(self) -> str | None:
        """The line this entry names (checked against the camera's ``lines``);
        ``None`` for kinds without one."""
        return None


class Membership(StrictModel):
    anchor: Anchor = Field(default="bottom_center", description="the box point tested")
    band: float = Field(
        default=0.0, ge=0, description="hysteresis, pixels: how far past the edge to change state"
    )
    mask_fraction: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="inside when at least this fraction of the mask is in the zone (not anchor)",
    )
    mask_band: float = Field(
        default=0.1, ge=0, lt=1, description="hysteresis on the mask fraction when leaving"
    )


class ZoneRule(RuleFields, Membership):
    """``enter`` / ``exit`` events when a track goes into or out of ``zone``."""

    type: Literal["zone"]
    zone: Name
    events: list[ZoneKind] = Field(default_factory=lambda: list(_ZONE_KINDS))
    initial: Literal["flag", "skip"] = Field(
        default="flag",
        description="a track first seen inside: `flag` = enter event with extra.initial, "
        "`skip` = no enter event",
    )
    exit_on_lost: bool = Field(
        default=True, description="exit event (extra.reason = lost) when a track inside is dropped"
    )

    def zone_name(self) -> str:
        return self.zone


class LineRule(RuleFields):
    """``line_in`` / ``line_out`` events and running counts when a track crosses ``line``."""

    type: Literal["line"]
    line: Name
    events: list[LineKind] = Field(default_factory=lambda: list(_LINE_KINDS))
    anchor: Anchor = "bottom_center"
    band: float = Field(
        default=2.0,
        ge=0,
        description="hysteresis, pixels: a crossing counts once the anchor is this far past",
    )

    def line_name(self) -> str:
        return self.line


class DwellRule(RuleFields, Membership):
    """A ``dwell`` event when a track has been inside ``zone`` for ``seconds``."""

    type: Literal["dwell"]
    zone: Name
    seconds: float = Field(gt=0, description="time inside (capture time) before the event")
    repeat: float | None = Field(
        default=None, gt=0, description="seconds between further dwell events on the same visit"
    )

    def zone_name(self) -> str:
        return self.zone


class CrowdingRule(RuleFields, Membership):
    """``crowding`` when over ``max_occupancy`` tracks are in ``zone``, then ``crowding_end``."""

    type: Literal["crowding"]
    zone: Name
    max_occupancy: int = Field(ge=0, description="crowded when the occupancy is above this")
    clear_occupancy: int | None = Field(
        default=None, ge=0, description="crowding ends at or below this (default max_occupancy - 1)"
    )
    min_duration: float = Field(
        default=0.0, ge=0, description="seconds the zone must stay crowded before the event"
    )
    events: list[CrowdKind] = Field(default_factory=lambda: list(_CROWD_KINDS))

    def zone_name(self) -> str:
        return self.zone

    @model_validator(mode="after")
    def _clear_below(self) -> CrowdingRule:
        if self.clear_occupancy is not None and self.clear_occupancy > self.max_occupancy:
            raise ValueError(
                f"clear_occupancy ({self.clear_occupancy}) must be <= max_occupancy "
                f"({self.max_occupancy})"
            )
        return self

    @property
    def clear_at(self) -> int:
        """Occupancy at or below which crowding ends."""
        if self.clear_occupancy is not None:
            return self.clear_occupancy
        return max(self.max_occupancy - 1, 0)


class RegionRule(RuleFields):
    """``on_region`` when a track's surroundings are ``region`` (a class) for ``seconds``.

    What a thing stands on or in is what lies around its mask (panoptic
    segments never overlap): the share of a ``margin``-pixel ring around
    the mask that is ``region``'s class, measured every frame.
    """

    type: Literal["region"]
    region: Name = Field(description="the class whose region the track must be on")
    min_fraction: float = Field(
        default=0.3, gt=0, le=1, description="least share of the ring around the mask"
    )
    seconds: float = Field(default=0.0, ge=0, description="for at least this long (capture time)")
    margin: float = Field(
        default=8.0, gt=0, le=512, description="ring width around the mask, pixels"
    )
    band: float = Field(
        default=0.1, ge=0, lt=1, description="hysteresis: off below min_fraction - band"
    )
    events: list[RegionKind] = Field(default_factory=lambda: list(_REGION_KINDS))

    def region_class(self) -> str:
        return self.region


class CoverageRule(RuleFields):
    """``coverage`` when ``region`` (a class) covers more (``above``) or less
    (``below``) than a fraction of ``zone`` for ``seconds``, then ``coverage_end``.

    A stuff class counts its region's pixels; a thing class the masks of its
    detections (``min_score`` applies to those).
    """

    type: Literal["coverage"]
    zone: Name
    region: Name = Field(description="the class whose share of the zone is measured")
    above: float | None = Field(default=None, ge=0, lt=1, description="fire above this share")
    below: float | None = Field(default=None, gt=0, le=1, description="fire below this share")
    seconds: float = Field(default=0.0, ge=0, description="for at least this long")
    band: float = Field(
        default=0.01, ge=0, lt=1, description="hysteresis on the share when it ends"
    )
    events: list[CoverageKind] = Field(default_factory=lambda: list(_COVERAGE_KINDS))

    def region_class(self) -> str:
        return self.region

    def zone_name(self) -> str:
        return self.zone

    @model_validator(mode="after")
    def _one_bound(self) -> CoverageRule:
        if (self.above is None) == (self.below is None):
            raise ValueError("give exactly one of `above` or `below` (a share of the zone)")
        if self.classes:
            raise ValueError(
                "`classes` does not apply to coverage rules: name the class in `region`"
            )
        return self


def check_finite(points: list[Point]) -> None:
    if not all(math.isfinite(v) for p in points for v in p):
        raise ValueError("coordinates must be finite numbers")
