"""The rule-kind rows answer what replay, the class checks and the stage ask of a kind."""

from __future__ import annotations

from typing import Any

import pytest

from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig
from streamseg.track.replay import needs_masks
from streamseg.track.rule_kinds import RULE_KINDS, kind_of

ZONE = {"polygon": [[0, 0], [10, 0], [10, 10]]}


def alerts(rule: dict[str, Any]) -> AlertsConfig:
    cam = {"zones": {"z": ZONE}, "rules": [{"name": "r", "include_mask": False, **rule}]}
    return AlertsConfig.model_validate({"cameras": {"cam": cam}})


@pytest.mark.parametrize(
    ("rule", "masks"),
    [
        ({"type": "zone", "zone": "z"}, False),
        ({"type": "zone", "zone": "z", "mask_fraction": 0.5}, True),  # the entry's own option
        ({"type": "zone", "zone": "z", "include_mask": True}, True),
        ({"type": "region", "region": "road"}, True),  # the row: region rules read masks
        ({"type": "coverage", "zone": "z", "region": "road", "above": 0.1}, True),
    ],
    ids=["zone", "mask_share", "include_mask", "region", "coverage"],
)
def test_replay_decodes_masks_when_the_row_or_the_entry_asks(
    rule: dict[str, Any], masks: bool
) -> None:
    tracking = TrackingConfig(match="box_iou")
    assert needs_masks(tracking, alerts(rule)) is masks


def test_each_entry_finds_its_row_and_the_rows_say_what_they_need() -> None:
    cfg = alerts({"type": "coverage", "zone": "z", "region": "road", "above": 0.1})
    (rule,) = cfg.cameras["cam"].rules
    assert kind_of(rule) is RULE_KINDS["coverage"] and rule.region_class() == "road"
    needs = {n: (k.masks, k.regions, k.counts) for n, k in RULE_KINDS.items()}
    assert needs["line"] == (False, False, True)
    assert needs["region"] == (True, True, False)
    assert needs["coverage"] == (True, False, False)
    assert needs["zone"] == needs["dwell"] == needs["crowding"] == (False, False, False)


@pytest.mark.parametrize(
    ("rule", "zone", "line"),
    [
        ({"type": "zone", "zone": "z"}, "z", None),
        ({"type": "dwell", "zone": "z", "seconds": 1}, "z", None),
        ({"type": "crowding", "zone": "z", "max_occupancy": 2}, "z", None),
        ({"type": "coverage", "zone": "z", "region": "road", "above": 0.1}, "z", None),
        ({"type": "line", "line": "l"}, None, "l"),
        ({"type": "region", "region": "road"}, None, None),
    ],
    ids=["zone", "dwell", "crowding", "coverage", "line", "region"],
)
def test_each_entry_names_its_zone_and_line_and_the_camera_checks_them(
    rule: dict[str, Any], zone: str | None, line: str | None
) -> None:
    cam: dict[str, Any] = {"zones": {"z": ZONE}, "lines": {"l": {"points": [[0, 0], [5, 5]]}}}
    cfg = AlertsConfig.model_validate(
        {"cameras": {"cam": {**cam, "rules": [{"name": "r", **rule}]}}}
    )
    (entry,) = cfg.cameras["cam"].rules
    assert (entry.zone_name(), entry.line_name()) == (zone, line)
    # a camera without the zone or line the entry names refuses it, naming what is missing
    bare = {"cameras": {"cam": {"rules": [{"name": "r", **rule}]}}}
    if zone is None and line is None:
        AlertsConfig.model_validate(bare)
        return
    with pytest.raises(ValueError, match=f"unknown {'zone' if zone else 'line'} '{zone or line}'"):
        AlertsConfig.model_validate(bare)
