"""Whether this model can run a camera's rules: the one check of rule classes.

``rule_problems(alerts, class_names, region_classes)`` lists every rule that
names a class the model cannot give it, as a :class:`RuleError` naming the
pipeline.yaml field and the fix:

* ``classes`` (every rule but ``coverage``) must be classes of the model,
  and, when the model gives class regions, thing classes: a region (stuff)
  class never becomes a track, so a rule filtering on one never fires;
* ``region`` (``region``, ``coverage``) must be a class of the model; that
  of a kind whose row says ``regions`` (``region``) must be a region (stuff)
  class of a model that gives regions, as its measure is the region around
  a track's mask (a ``coverage`` rule may name a thing class: its tracks'
  masks cover the zone).

``region_classes``: the classes the model gives as regions (a semantic
model's every class, a panoptic model's stuff classes, none for an instance
model); ``None`` when not known, which checks names only. ``check`` lists
them all, ``serve`` refuses to start with one (exit 2), and the console
refuses a change with one (422), all through this function.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamseg.configbase.errors import ConfigIssue, loc_of
from streamseg.errors import StartupError
from streamseg.track import alerts as cfg
from streamseg.track.rule_kinds import kind_of
from streamseg.track.rules.base import class_ids

__all__ = ["RuleError", "camera_rule_problems", "rule_issues", "rule_problems"]


class RuleError(StartupError, ValueError):
    """A rule that cannot run with this model (e.g. a class it does not have).

    ``field`` is the pipeline.yaml field to fix; the message says how.
    """


def rule_problems(
    alerts: cfg.AlertsConfig,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> list[tuple[str, int, RuleError]]:
    """``(camera, rule index, error)`` of every rule this model cannot run (module docstring)."""
    out = []
    for cid, cam in alerts.cameras.items():
        out += [(cid, i, e) for i, e in camera_rule_problems(cid, cam, class_names, region_classes)]
    return out


def rule_issues(
    alerts: cfg.AlertsConfig,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> list[ConfigIssue]:
    """:func:`rule_problems` as config issues, each naming its field
    (``alerts.cameras.ID.rules[i].classes`` or ``.region``) and the fix."""
    return [
        ConfigIssue(str(exc), loc_of(exc.field or "alerts"), hint=exc.fix)
        for _cid, _i, exc in rule_problems(alerts, class_names, region_classes)
    ]


def camera_rule_problems(
    camera_id: str,
    section: cfg.CameraAlerts,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> list[tuple[int, RuleError]]:
    """``(rule index, error)`` of every rule of one camera's section this model cannot run."""
    out = []
    for i, rule in enumerate(section.rules):
        where = f"alerts.cameras.{camera_id}.rules[{i}]"
        out += [(i, e) for e in _problems(rule, where, class_names, region_classes)]
    return out


def _problems(
    rule: cfg.RuleConfig,
    where: str,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None,
) -> list[RuleError]:
    known = [n for n in class_names[1:]]
    regions = set(region_classes or ())
    out: list[RuleError] = []
    try:
        class_ids(rule.classes, class_names, f"{where.rsplit('.rules[', 1)[0]}.{rule.name}")
    except ValueError as exc:
        out.append(RuleError(str(exc), field=f"{where}.classes"))
    else:
        stuff = [c for c in rule.classes if c in regions]
        if stuff:
            things = [n for n in known if n not in regions]
            out.append(
                RuleError(
                    f"rule {rule.name!r}: {stuff[0]!r} is a region (stuff) class of this model; "
                    "it never becomes a track, so the rule would never fire",
                    field=f"{where}.classes",
                    fix=f"name thing classes: {', '.join(things) or '(this model has none)'}",
                )
            )
    region = rule.region_class()
    if region is None:
        return out
    if region not in known:
        out.append(
            RuleError(
                f"rule {rule.name!r}: unknown class {region!r} in `region`; "
                f"the model's classes are: {', '.join(known) or '(none)'}",
                field=f"{where}.region",
            )
        )
    elif kind_of(rule).regions and regions and region not in regions:
        out.append(
            RuleError(
                f"rule {rule.name!r}: {region!r} is a thing class of this model, not a region; "
                "a region rule reads the regions around a track's mask, so it would never fire",
                field=f"{where}.region",
                fix=f"name a region (stuff) class: {', '.join(sorted(regions))}",
            )
        )
    return out
