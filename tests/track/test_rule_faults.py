"""A rule the model cannot run is refused up front; one that fails at run time is
disabled, reported, and the camera's other rules go on."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from streamseg.track.config import TrackingConfig
from streamseg.track.rules.checks import RuleError, rule_issues, rule_problems
from streamseg.track.rules.zones import ZoneRule
from streamseg.track.stage import TrackingStage
from tests.support.tracking import Driver, alerts, box_at

SQUARE = {"polygon": [[60.0, 20.0], [140.0, 20.0], [140.0, 80.0], [60.0, 80.0]]}
# A panoptic model's classes: person and car are things, road and water stuff.
PANOPTIC = ("__background__", "person", "car", "road", "water")
STUFF = ("road", "water")


def _section(*rules: dict[str, Any]) -> Any:
    return alerts(list(rules), zones={"bay": SQUARE})


@pytest.mark.parametrize(
    ("rule", "regions", "field", "words"),
    [
        # a class the model does not have, in `classes` and in `region`
        ({"type": "zone", "zone": "bay", "classes": ["zebra"]}, None, "classes", "zebra"),
        (
            {"type": "coverage", "zone": "bay", "region": "lava", "above": 0.1},
            None,
            "region",
            "in `region`",
        ),
        ({"type": "region", "region": "lava"}, STUFF, "region", "unknown class 'lava'"),
        # report item 5: a region rule on a thing class never fires
        ({"type": "region", "region": "person"}, STUFF, "region", "is a thing class"),
        # a tracked rule on a stuff class never sees a track
        ({"type": "zone", "zone": "bay", "classes": ["road"]}, STUFF, "classes", "never becomes"),
        ({"type": "region", "region": "road", "classes": ["water"]}, STUFF, "classes", "stuff"),
    ],
)
def test_rules_the_model_cannot_run_are_refused_naming_the_field(
    rule: dict[str, Any], regions: tuple[str, ...] | None, field: str, words: str
) -> None:
    config = _section({"name": "r", **rule})
    [(cid, index, exc)] = rule_problems(config, PANOPTIC, regions)
    assert (cid, index, exc.field) == ("cam", 0, f"alerts.cameras.cam.rules[0].{field}")
    assert words in str(exc)
    [issue] = rule_issues(config, PANOPTIC, regions)
    assert issue.path == exc.field and issue.hint == exc.fix
    with pytest.raises(RuleError, match=words.replace("(", r"\(").replace("[", r"\[")):
        TrackingStage(
            tracking=TrackingConfig(), alerts=config, class_names=PANOPTIC, region_classes=regions
        )


@pytest.mark.parametrize(
    "rule",
    [
        {"type": "region", "region": "road", "classes": ["person"]},
        {"type": "coverage", "zone": "bay", "region": "car", "above": 0.5},  # tracks' masks
        {"type": "coverage", "zone": "bay", "region": "water", "above": 0.5},
        {"type": "zone", "zone": "bay", "classes": ["person", "car"]},
    ],
)
def test_rules_the_model_can_run_pass(rule: dict[str, Any]) -> None:
    assert rule_problems(_section({"name": "r", **rule}), PANOPTIC, STUFF) == []


def test_every_problem_is_listed_at_once() -> None:
    config = _section(
        {"name": "a", "type": "zone", "zone": "bay", "classes": ["zebra"]},
        {"name": "b", "type": "zone", "zone": "bay"},
        {"name": "c", "type": "region", "region": "car", "classes": ["road"]},
    )
    fields = [exc.field for _c, _i, exc in rule_problems(config, PANOPTIC, STUFF)]
    assert fields == [
        "alerts.cameras.cam.rules[0].classes",
        "alerts.cameras.cam.rules[2].classes",
        "alerts.cameras.cam.rules[2].region",
    ]


def test_a_failing_rule_is_disabled_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = InMemoryMetricReader()
    config = _section(
        {"name": "broken", "type": "zone", "zone": "bay"},
        {"name": "fine", "type": "zone", "zone": "bay", "anchor": "center"},
    )
    d = Driver(config, given_ids=True)
    d.stage = TrackingStage(
        tracking=d.stage.tracking,
        alerts=config,
        class_names=d.stage.class_names,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    real = ZoneRule.update
    calls = {"broken": 0}

    def update(self: ZoneRule, view: Any) -> Any:
        if self.name == "broken":
            calls["broken"] += 1
            raise RuntimeError("boom")
        return real(self, view)

    monkeypatch.setattr(ZoneRule, "update", update)
    events = d.run([[box_at(x, 50) for x in (40, 50, 100, 100, 170)]])
    # "fine" fired both ways; "broken" ran once, then was off.
    assert [(e.rule, e.kind) for e in events] == [("fine", "enter"), ("fine", "exit")]
    assert calls["broken"] == 1
    assert d.stage.degraded() == {"cam": {"broken": "RuntimeError: boom"}}
    points = [
        (p.attributes, p.value)
        for m in reader.get_metrics_data().resource_metrics[0].scope_metrics
        for metric in m.metrics
        if metric.name == "streamseg.track.rules.failures"
        for p in metric.data.data_points
    ]
    assert points == [({"camera": "cam", "rule": "broken"}, 1)]
    # Changing the camera's rules brings the rule back.
    d.stage.set_alerts(config)  # the same section: nothing changes
    assert d.stage.degraded() == {"cam": {"broken": "RuntimeError: boom"}}
    d.stage.set_alerts(_section({"name": "broken", "type": "zone", "zone": "bay"}))
    d.step([box_at(100, 50)], ids=[1])
    assert d.stage.degraded() == {"cam": {"broken": "RuntimeError: boom"}}  # still raises
    monkeypatch.setattr(ZoneRule, "update", real)
    d.stage.set_alerts(_section({"name": "broken", "type": "zone", "zone": "bay", "band": 1.0}))
    d.step([box_at(100, 50)], ids=[1])
    assert d.stage.degraded() == {}


def test_a_rule_that_fails_while_built_is_disabled_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _section(
        {"name": "broken", "type": "zone", "zone": "bay"},
        {"name": "fine", "type": "dwell", "zone": "bay", "seconds": 0.1},
    )

    def from_config(cls: type, rule: Any, context: Any) -> Any:
        raise ValueError("cannot build")

    monkeypatch.setattr(ZoneRule, "from_config", classmethod(from_config))
    d = Driver(config, given_ids=True)
    events = d.run([[box_at(100, 50)] * 4])
    assert {e.rule for e in events} == {"fine"}
    assert d.stage.degraded() == {"cam": {"broken": "ValueError: cannot build"}}
