"""One camera's alert rules, built from its ``alerts.cameras.<id>`` section."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from streamseg.config import alerts as cfg
from streamseg.geometry import Polygon, Segment
from streamseg.track.rules.base import RuleBase, class_ids
from streamseg.track.rules.lines import LineRule
from streamseg.track.rules.membership import Membership
from streamseg.track.rules.zones import CrowdingRule, DwellRule, ZoneRule
from streamseg.track.view import TrackView
from streamseg.types import Event

__all__ = ["CameraRules"]

log = logging.getLogger("streamseg.track.rules")


class CameraRules:
    """Runs a camera's rules on each frame's ``TrackView``.

    Geometry given in normalised coordinates is scaled to the frame size of
    the first frame (and again, with fresh state, if the size changes).

    Args:
        camera_id: the camera.
        config: its section of ``alerts.cameras``.
        class_names: the model's class names (index 0 is background); rule
            ``classes`` must be among them (``ValueError`` otherwise).
    """

    def __init__(
        self, *, camera_id: str, config: cfg.CameraAlerts, class_names: Sequence[str]
    ) -> None:
        self.camera_id = camera_id
        self.config = config
        self.class_names = tuple(class_names)
        self._labels = [
            class_ids(rule.classes, self.class_names, f"alerts.cameras.{camera_id}.{rule.name}")
            for rule in config.rules
        ]
        self.rules: list[RuleBase] = []
        self._zones: dict[str, Polygon] = {}
        self._size: tuple[int, int] | None = None

    def update(self, view: TrackView) -> list[Event]:
        """Events of all rules for this frame, in rule order."""
        if view.frame.image_size != self._size:
            self._build(view.frame.image_size)
        events: list[Event] = []
        for rule in self.rules:
            events += rule.update(view)
        return events

    def occupancy(self) -> list[tuple[str, str, int]]:
        """``(rule, zone, tracks inside)`` of every zone rule."""
        out = []
        for rule in self.rules:
            occ = rule.occupancy()
            if occ is not None:
                out.append((rule.name, str(getattr(rule, "zone", "")), occ))
        return out

    # -- building --------------------------------------------------------------
    def _build(self, size: tuple[int, int]) -> None:
        if self._size is not None:
            log.warning(
                "alerts[%s]: frame size changed from %s to %s; rule state starts afresh",
                self.camera_id,
                self._size,
                size,
            )
        self._size = size
        self._zones = {}  # one per zone: rules share its per-frame depths
        self.rules = [
            self._rule(rule, labels, size)
            for rule, labels in zip(self.config.rules, self._labels, strict=True)
        ]

    def _scale(self, coordinates: str | None, size: tuple[int, int]) -> np.ndarray:
        if (coordinates or self.config.coordinates) == "normalized":
            return np.array([size[1], size[0]], np.float64)
        return np.ones(2)

    def _polygon(self, name: str, size: tuple[int, int]) -> Polygon:
        if name in self._zones:
            return self._zones[name]
        zone = self.config.zones[name]
        pts = np.asarray(zone.polygon, np.float64) * self._scale(zone.coordinates, size)
        h, w = size
        if pts[:, 0].min() >= w or pts[:, 1].min() >= h or pts.max() < 0:
            log.warning(
                "alerts[%s]: zone %r lies outside the %dx%d frame", self.camera_id, name, w, h
            )
        self._zones[name] = Polygon(pts)
        return self._zones[name]

    def _rule(self, rule: cfg.RuleConfig, labels: Any, size: tuple[int, int]) -> RuleBase:
        common: dict[str, Any] = {
            "name": rule.name,
            "camera_id": self.camera_id,
            "class_names": self.class_names,
            "labels": labels,
            "min_score": rule.min_score,
            "cooldown": rule.cooldown,
            "include_mask": rule.include_mask,
        }
        if isinstance(rule, cfg.LineRule):
            line = self.config.lines[rule.line]
            scale = self._scale(line.coordinates, size)
            p, q = (np.asarray(pt, np.float64) * scale for pt in line.points)
            return LineRule(
                line=rule.line,
                segment=Segment((float(p[0]), float(p[1])), (float(q[0]), float(q[1]))),
                in_sign=1 if line.in_side == "right" else -1,
                anchor=rule.anchor,
                band=rule.band,
                events=list(rule.events),
                **common,
            )
        membership = Membership(
            polygon=self._polygon(rule.zone, size),
            anchor=rule.anchor,
            band=rule.band,
            mask_fraction=rule.mask_fraction,
            mask_band=rule.mask_band,
        )
        common.update(zone=rule.zone, membership=membership)
        if isinstance(rule, cfg.ZoneRule):
            return ZoneRule(
                events=list(rule.events),
                initial=rule.initial,
                exit_on_lost=rule.exit_on_lost,
                **common,
            )
        if isinstance(rule, cfg.DwellRule):
            return DwellRule(seconds=rule.seconds, repeat=rule.repeat, **common)
        return CrowdingRule(
            max_occupancy=rule.max_occupancy,
            clear_at=rule.clear_at,
            min_duration=rule.min_duration,
            events=list(rule.events),
            **common,
        )
