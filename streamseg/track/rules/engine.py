"""One camera's alert rules, built from its ``alerts.cameras.<id>`` section.

Which class runs a rule comes from the rule-kind registry
(:data:`streamseg.track.rule_kinds.RULE_KINDS`); each class builds itself from
its config entry with ``from_config(rule, context)``, where the
:class:`~streamseg.track.rules.context.RuleContext` hands it the shared
arguments and the camera's geometry in pixels.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamseg.geometry import Polygon, Segment, Shapes
from streamseg.registry import load
from streamseg.track import alerts as cfg
from streamseg.track.rule_kinds import kind_of
from streamseg.track.rules.base import RuleBase, class_ids
from streamseg.track.rules.checks import RuleError, camera_rule_problems, rule_problems
from streamseg.track.rules.context import RuleContext
from streamseg.track.rules.zone_state import ZoneState
from streamseg.track.view import TrackView
from streamseg.types import Event

__all__ = [
    "CameraRules",
    "RuleError",
    "check_rule_classes",
    "rule_class",
    "rule_class_problems",
]


log = logging.getLogger("streamseg.track.rules")


class CameraRules:
    """Runs a camera's rules on each frame's ``TrackView``.

    Geometry given in normalised coordinates is scaled to the frame size of
    the first frame (and again, with fresh state, if the size changes).

    A rule that fails (while being built, or on a frame) is disabled and
    reported (``failed``, the log, ``on_failure``); the camera's other rules go
    on. It stays off until the camera's rules are changed.

    Args:
        camera_id: the camera.
        config: its section of ``alerts.cameras``.
        class_names: the model's class names (index 0 is background).
        region_classes: the classes the model gives as regions (``None``:
            not known); every rule's classes are checked against these and
            ``class_names`` here (``RuleError`` naming the field,
            ``streamseg.track.rules.checks``).
        on_failure: called with ``(camera_id, rule name, exception)`` when a
            rule is disabled.
    """

    def __init__(
        self,
        *,
        camera_id: str,
        config: cfg.CameraAlerts,
        class_names: Sequence[str],
        region_classes: Sequence[str] | None = None,
        on_failure: Callable[[str, str, BaseException], None] | None = None,
    ) -> None:
        self.camera_id = camera_id
        self.config = config
        self.class_names = tuple(class_names)
        self.region_classes = None if region_classes is None else tuple(region_classes)
        problems = camera_rule_problems(camera_id, config, self.class_names, self.region_classes)
        if problems:
            raise problems[0][1]
        self._labels = [
            _labels(rule, self.class_names, f"alerts.cameras.{camera_id}.rules[{i}].classes")
            for i, rule in enumerate(config.rules)
        ]
        self.on_failure = on_failure
        self.failed: dict[str, str] = {}  # rule name -> why it was disabled
        self.rules: list[RuleBase] = []
        self._shapes = Shapes(zones={}, lines={})
        self._zones: dict[str, Polygon] = {}
        self._zone_states: dict[tuple[Any, ...], ZoneState] = {}
        self._size: tuple[int, int] | None = None

    def update(self, view: TrackView) -> list[Event]:
        """Events of all rules for this frame, in rule order (a rule that raises is
        disabled, the others go on)."""
        if view.frame.image_size != self._size:
            self._build(view.frame.image_size)
        events: list[Event] = []
        broken = None
        for rule in self.rules:
            try:
                events += rule.update(view)
            except Exception as exc:
                self._disable(rule.name, exc)
                broken = True
        if broken:
            self.rules = [r for r in self.rules if r.name not in self.failed]
        return events

    def _disable(self, name: str, exc: BaseException) -> None:
        self.failed[name] = f"{type(exc).__name__}: {exc}"
        log.error(
            "alerts[%s]: rule %r failed and is disabled (the camera's other rules go on): %s",
            self.camera_id,
            name,
            self.failed[name],
            exc_info=exc,
        )
        if self.on_failure is not None:
            try:
                self.on_failure(self.camera_id, name, exc)
            except Exception:
                log.exception("alerts[%s]: reporting rule %r's failure", self.camera_id, name)

    def occupancy(self) -> list[tuple[str, str, int]]:
        """``(rule, zone, tracks inside)`` of every zone rule."""
        out = []
        for rule in self.rules:
            told = rule.occupancy()
            if told is not None:
                out.append((rule.name, *told))
        return out

    def line_counts(self) -> dict[str, tuple[int, int]]:
        """``{line: (in, out)}`` of the rules whose kind counts crossings (``RuleKind.counts``)."""
        counting = {r.name for r in self.config.rules if kind_of(r).counts}
        out = {}
        for rule in self.rules:
            told = rule.crossings() if rule.name in counting else None
            if told is not None:
                line, n_in, n_out = told
                out[line] = (n_in, n_out)
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
        self._shapes = self.config.shapes(size)
        self._zones = {}  # one per zone: rules share its per-frame depths
        self._zone_states = {}  # one per zone, test and filters: rules share inside states
        self.rules = []
        for rule, labels in zip(self.config.rules, self._labels, strict=True):
            if rule.name in self.failed:
                continue
            try:
                self.rules.append(self._rule(rule, labels, size))
            except Exception as exc:
                self._disable(rule.name, exc)

    def _polygon(self, name: str, size: tuple[int, int]) -> Polygon:
        if name in self._zones:
            return self._zones[name]
        pts = np.asarray(self._shapes.zones[name], np.float64)
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
        context = RuleContext(
            common=common,
            polygon=lambda name: self._polygon(name, size),
            line=self._line,
            zone_states=self._zone_states,
        )
        built: RuleBase = rule_class(rule).from_config(rule, context)
        return built

    def _line(self, name: str) -> tuple[Segment, int]:
        line = self.config.lines[name]
        p, q = self._shapes.lines[name]
        return Segment(p, q), 1 if line.in_side == "right" else -1


def rule_class_problems(
    alerts: cfg.AlertsConfig,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> list[tuple[str, int, RuleError]]:
    """``(camera, rule index, error)`` of every rule naming a class this model cannot
    give it (``streamseg.track.rules.checks``).

    What building the rules checks, without building them: ``check`` lists
    them all, ``serve`` asks before it starts the model when the classes
    are known from the config or the checkpoint alone, the console before
    it applies a change.
    """
    return rule_problems(alerts, class_names, region_classes)


def check_rule_classes(
    alerts: cfg.AlertsConfig,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> None:
    """Raise the ``RuleError`` of the first rule this model cannot run."""
    problems = rule_class_problems(alerts, class_names, region_classes)
    if problems:
        raise problems[0][2]


def _labels(rule: cfg.RuleConfig, class_names: Sequence[str], field: str) -> Any:
    try:
        return class_ids(rule.classes, class_names, field.rsplit(".rules[", 1)[0] + f".{rule.name}")
    except ValueError as exc:
        raise RuleError(str(exc), field=field) from None


def rule_class(rule: cfg.RuleConfig) -> type[RuleBase]:
    """The class that runs ``rule`` (its ``type``'s row of the rule-kind registry)."""
    cls: type[RuleBase] = load(kind_of(rule).engine)
    return cls
