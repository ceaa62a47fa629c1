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

:data:`RULE_KINDS` is the one list of rule kinds: each row holds the config
model of a ``rules:`` entry and, side by side, the ``"module:Class"`` of the
rule in :mod:`streamseg.track.rules` that runs it (imported when a camera's
rules are built). ``RuleConfig`` (the ``type``-tagged union) is built from
it. Adding a rule kind: its config model (``streamseg/track/rule_config.py``),
its rule class (one file under ``streamseg/track/rules/``) and one row here.
Geometry is in frame pixels (x right, y down) or normalised to the frame
(``[0, 1]`` on both axes); times are seconds of capture time.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field, model_validator

from streamseg.configbase.base import StrictModel
from streamseg.geometry import Coordinates, Point, Shapes, to_pixels
from streamseg.track.rule_config import (
    CoverageRule,
    CrowdingRule,
    DwellRule,
    LineConfig,
    LineRule,
    Name,
    RegionRule,
    RuleFields,
    ZoneConfig,
    ZoneRule,
)

__all__ = [
    "ALERT_KINDS",
    "RULE_KINDS",
    "AlertsConfig",
    "CameraAlerts",
    "RuleConfig",
    "RuleKind",
]


@dataclasses.dataclass(frozen=True)
class RuleKind:
    """One rule kind: its config model, the ``"module:Class"`` of the rule that runs it
    and what each alert ``kind`` it publishes means.

    The rule class has ``from_config(rule, context)`` (see
    :class:`streamseg.track.rules.context.RuleContext`). ``events`` maps each
    alert kind to one line for the docs; its keys must be the kinds the
    config model's ``events`` field allows (a rule without one publishes a
    single kind named after its ``type``).
    """

    config: type[RuleFields]
    engine: str
    events: Mapping[str, str]

    def __post_init__(self) -> None:
        if tuple(self.events) != self.kinds:
            raise TypeError(
                f"rule kind {self.type!r}: events {tuple(self.events)} must be its kinds "
                f"{self.kinds}, in that order"
            )

    @property
    def type(self) -> str:
        """The ``type:`` value that selects this kind (the config model's ``type`` literal)."""
        (value,) = typing.get_args(self.config.model_fields["type"].annotation)
        return str(value)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The alert kinds this rule publishes (the ``events:`` choices, else its type)."""
        field = self.config.model_fields.get("events")
        if field is None:
            return (self.type,)
        (literal,) = typing.get_args(field.annotation)  # list[Literal[...]]
        return tuple(str(k) for k in typing.get_args(literal))


def _by_type(*kinds: RuleKind) -> dict[str, RuleKind]:
    return {kind.type: kind for kind in kinds}


_ENGINE = "streamseg.track.rules"

RULE_KINDS: dict[str, RuleKind] = _by_type(
    RuleKind(
        ZoneRule,
        f"{_ENGINE}.zones:ZoneRule",
        {
            "enter": "a track went into the zone (`extra.initial` when first seen inside)",
            "exit": "a track left the zone (`extra.reason`: `lost` when its track was dropped)",
        },
    ),
    RuleKind(
        LineRule,
        f"{_ENGINE}.lines:LineRule",
        {
            "line_in": "a track crossed the line into its `in_side`; `count`: such crossings "
            "so far",
            "line_out": "a track crossed the line the other way; `count`: such crossings so far",
        },
    ),
    RuleKind(
        DwellRule,
        f"{_ENGINE}.zones:DwellRule",
        {"dwell": "a track stayed in the zone for `seconds` (`extra.dwell_seconds`)"},
    ),
    RuleKind(
        CrowdingRule,
        f"{_ENGINE}.zones:CrowdingRule",
        {
            "crowding": "more than `max_occupancy` tracks in the zone; `count`: the occupancy",
            "crowding_end": "the occupancy fell to `clear_occupancy` or below; `count`: the "
            "occupancy, `extra.seconds`: how long it was crowded",
        },
    ),
    RuleKind(
        RegionRule,
        f"{_ENGINE}.regions:RegionRule",
        {
            "on_region": "a track's surroundings were `extra.region` (at least `min_fraction` "
            "of a ring around its mask, `extra.fraction`) for `seconds`",
            "off_region": "a track that was on the region left it (`extra.reason`: `lost` "
            "when its track was dropped); `extra.seconds`: how long it was on",
        },
    ),
    RuleKind(
        CoverageRule,
        f"{_ENGINE}.regions:CoverageRule",
        {
            "coverage": "`extra.region` covered more (`above`) or less (`below`) than the "
            "share of the zone for `seconds`; `extra.fraction`: the share",
            "coverage_end": "the share came back past the bound; `extra.seconds`: how long "
            "it lasted",
        },
    ),
)

# Every alert ``kind`` a message can carry, in the registry's order: the one list
# the JSON Schema's ``kind`` enum and docs/events.md's table are generated from.
ALERT_KINDS: tuple[str, ...] = tuple(k for rule in RULE_KINDS.values() for k in rule.kinds)

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
            line_name, zone_name = getattr(rule, "line", None), getattr(rule, "zone", None)
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
