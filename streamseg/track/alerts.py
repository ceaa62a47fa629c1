"""The ``alerts:`` section of pipeline.yaml: zones, lines and the rules that watch them.

Rules are per camera. Each camera names its zones (polygons) and lines
(directed segments) once, then lists rules that refer to them by name::

    alerts:
      enabled: true
      cameras:
        gate:                          # a camera id from `cameras:`
          coordinates: normalized      # or pixels (the default)
          zones:
            dock: {polygon: [[0.1, 0.5], [0.6, 0.5], [0.6, 1.0], [0.1, 1.0]]}
          lines:
            door: {points: [[0.5, 0.0], [0.5, 1.0]], in_side: right}
          rules:
            - {name: dock-presence, type: zone, zone: dock, classes: [person]}
            - {name: door-count, type: line, line: door}
            - {name: loitering, type: dwell, zone: dock, seconds: 30}
            - {name: crowd, type: crowding, zone: dock, max_occupancy: 5}
            - {name: on-rails, type: region, region: railroad, classes: [person]}
            - {name: wet-floor, type: coverage, zone: dock, region: water, above: 0.05}

``region`` and ``coverage`` rules read the class regions of a semantic or
panoptic model (``model.task``). docs/tracking.md explains every field and
the events each rule emits.

:data:`RULE_KINDS` (``streamseg.track.rule_kinds``) is the one list of rule
kinds; ``RuleConfig`` (the ``type``-tagged union of its config models) and
``ALERT_KINDS`` are built from it when this module is imported, which
closes the table to rows registered later (a plug-in registers before).
Geometry is in frame pixels (x right, y down) or normalised to the frame
(``[0, 1]`` on both axes); times are seconds of capture time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field, model_validator

from streamseg.configbase.base import StrictModel
from streamseg.geometry import Coordinates, Point, Shapes, to_pixels
from streamseg.track.rule_config import (
    LineConfig,
    Name,
    RuleFields,
    ZoneConfig,
)
from streamseg.track.rule_kinds import RULE_KINDS

__all__ = [
    "ALERT_KINDS",
    "AlertsConfig",
    "CameraAlerts",
    "RuleConfig",
]


# Every alert ``kind`` a message can carry, in the registry's order: the one list
# the JSON Schema's ``kind`` enum and docs/events.md's table are generated from.
ALERT_KINDS: tuple[str, ...] = tuple(
    k for rule in RULE_KINDS.close("streamseg.track.alerts").values() for k in rule.kinds
)

if TYPE_CHECKING:
    RuleConfig = RuleFields
else:
    RuleConfig = Annotated[
        Union[tuple(kind.config for kind in RULE_KINDS.values())],  # noqa: UP007
        Field(discriminator="type"),
    ]


class CameraAlerts(StrictModel):
    """One camera's zones, lines and rules."""

    coordinates: Coordinates = Field(
        default="pixels", description="default for zones and lines: pixels or normalized [0, 1]"
    )
    zones: dict[Name, ZoneConfig] = Field(default_factory=dict)
    lines: dict[Name, LineConfig] = Field(default_factory=dict)
    rules: list[RuleConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_references(self) -> CameraAlerts:
        problems: list[str] = []
        for name, zone in self.zones.items():
            if self.coordinates_of(zone) == "normalized":
                problems += _outside_unit(f"zone {name!r}", zone.polygon)
        for name, line in self.lines.items():
            if self.coordinates_of(line) == "normalized":
                problems += _outside_unit(f"line {name!r}", list(line.points))
        seen: set[str] = set()
        for i, rule in enumerate(self.rules):
            where = f"rules[{i}] ({rule.name!r})"
            if rule.name in seen:
                problems.append(f"{where}: duplicate rule name; rule names must be unique")
            seen.add(rule.name)
            line_name, zone_name = rule.line_name(), rule.zone_name()
            if line_name is not None and line_name not in self.lines:
                problems.append(f"{where}: unknown line {line_name!r}{_known(self.lines)}")
            if zone_name is not None and zone_name not in self.zones:
                problems.append(f"{where}: unknown zone {zone_name!r}{_known(self.zones)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def coordinates_of(self, shape: ZoneConfig | LineConfig) -> Coordinates:
        """How a zone's or line's points are written: its own ``coordinates``, else the
        camera's."""
        return shape.coordinates or self.coordinates

    def shapes(self, size: tuple[int, int], *, scale: float = 1.0) -> Shapes:
        """The zones and lines in pixels of a frame of ``size`` ``(H, W)``; with
        ``scale``, of an image of ``size`` showing the frame scaled down by it
        (``streamseg.geometry.to_pixels``)."""
        zones = {
            name: to_pixels(z.polygon, self.coordinates_of(z), size, scale=scale)
            for name, z in self.zones.items()
        }
        lines = {}
        for name, line in self.lines.items():
            p, q = to_pixels(line.points, self.coordinates_of(line), size, scale=scale)
            lines[name] = (p, q)
        return Shapes(zones=zones, lines=lines)


class AlertsConfig(StrictModel):
    """Alert rules: zones, lines, dwell, crowding, regions and coverage, per camera id."""

    enabled: bool = True
    cameras: dict[Name, CameraAlerts] = Field(default_factory=dict)


def _known(names: Mapping[str, object]) -> str:
    return f" (defined: {', '.join(names)})" if names else " (none is defined)"


def _outside_unit(what: str, points: list[Point]) -> list[str]:
    bad = [p for p in points if not (0.0 <= p[0] <= 1.0 and 0.0 <= p[1] <= 1.0)]
    if not bad:
        return []
    return [
        f"{what} uses normalized coordinates but has points outside [0, 1] "
        f"(e.g. {list(bad[0])}); use `coordinates: pixels` for pixel values"
    ]
