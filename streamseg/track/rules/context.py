"""``RuleContext``: what a rule class is handed to build itself from its config entry.

:class:`streamseg.track.rules.engine.CameraRules` makes one per rule
(``from_config(rule, context)``); the rules on one zone with the same
membership test share one :class:`ZoneState` through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from streamseg.geometry import Polygon, Segment
from streamseg.track.rules.membership import Membership
from streamseg.track.rules.zone_state import ZoneState

__all__ = ["RuleContext"]


@dataclasses.dataclass(frozen=True)
class RuleContext:
    """What a rule class needs from its camera to build itself from its config entry.

    Attributes:
        common: :class:`RuleBase`'s keyword arguments (name, camera, classes,
            filters, cooldown).
        polygon: a zone's polygon in frame pixels, by name (shared by the
            camera's rules on that zone).
        line: a line's segment in frame pixels and its ``in`` sign (``+1``
            for ``in_side: right``), by name.
        zone_states: the camera's :class:`ZoneState` by zone, membership
            test and filters (rules that would keep the same states share one).
    """

    common: dict[str, Any]
    polygon: Callable[[str], Polygon]
    line: Callable[[str], tuple[Segment, int]]
    zone_states: dict[tuple[Any, ...], ZoneState] = dataclasses.field(default_factory=dict)

    def zone_options(self, rule: Any) -> dict[str, Any]:
        """``common`` plus ``zone`` and its inside ``state`` (with the membership
        test), for rules on a zone."""
        labels = self.common["labels"]
        key = (
            rule.zone,
            rule.anchor,
            rule.band,
            rule.mask_fraction,
            rule.mask_band,
            self.common["min_score"],
            None if labels is None else tuple(labels.tolist()),
        )
        state = self.zone_states.get(key)
        if state is None:
            membership = Membership(
                polygon=self.polygon(rule.zone),
                anchor=rule.anchor,
                band=rule.band,
                mask_fraction=rule.mask_fraction,
                mask_band=rule.mask_band,
            )
            state = self.zone_states[key] = ZoneState(membership)
        return {**self.common, "zone": rule.zone, "state": state}
