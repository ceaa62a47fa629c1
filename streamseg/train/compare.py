"""Two models' evaluations side by side: is the new one better than the one serving?

``streamseg eval --baseline OLD.pth NEW.pth`` evaluates both on the same
data (:func:`streamseg.train.evaluate.evaluate_model` with ``per_class``)
and :func:`compare` puts the two results together::

    {"baseline": {...}, "candidate": {...},          # each model's own eval JSON
     "difference": {"bbox": {"AP": +0.01, ...}, "segm": {...},
                    "per_class": {"disc": {"bbox": .., "segm": ..}, ...}},
     "classes": {"kept": [...], "added": [...], "dropped": [...]},
     "kept_classes": {"baseline": {"bbox": .., "segm": ..}, "candidate": {...},
                      "difference": {...}}}

Differences are ``candidate - baseline``; ``None`` where either side has no
number (a class one model lacks, or AP -1: no ground truth). The overall AP
of a model averages over its own classes, so when the class lists differ
``kept_classes`` compares the classes both models have, on equal terms.
:func:`format_table` renders the same as a plain-text table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["compare", "format_table"]

# Metric groups compared when both results have them (eval JSON keys).
_GROUPS = ("bbox", "segm", "panoptic", "sem_seg")
_AP_TYPES = ("bbox", "segm")


def _diff(new: Any, old: Any) -> float | None:
    if not isinstance(new, int | float) or not isinstance(old, int | float):
        return None
    if new < 0 or old < 0:  # -1: undefined (no ground truth)
        return None
    return round(float(new) - float(old), 6)


def _class_mean(per_class: Mapping[str, Any], names: list[str], iou_type: str) -> float:
    values = [per_class[n][iou_type] for n in names if per_class[n].get(iou_type, -1) >= 0]
    return round(sum(values) / len(values), 6) if values else -1.0


def compare(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """``baseline`` and ``candidate`` eval results (with ``per_class``) compared."""
    old_classes: dict[str, Any] = dict(baseline.get("per_class", {}))
    new_classes: dict[str, Any] = dict(candidate.get("per_class", {}))
    difference: dict[str, Any] = {}
    for group in _GROUPS:
        old, new = baseline.get(group), candidate.get(group)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            difference[group] = {k: _diff(new[k], old.get(k)) for k in new if k in old}
    names = list(dict.fromkeys([*new_classes, *old_classes]))
    difference["per_class"] = {
        n: {
            t: _diff(new_classes.get(n, {}).get(t), old_classes.get(n, {}).get(t))
            for t in _AP_TYPES
        }
        for n in names
    }
    kept = [n for n in new_classes if n in old_classes]
    shared: dict[str, dict[str, float | None]] = {
        side: {t: _class_mean(per, kept, t) for t in _AP_TYPES}
        for side, per in (("baseline", old_classes), ("candidate", new_classes))
    }
    shared["difference"] = {
        t: _diff(shared["candidate"][t], shared["baseline"][t]) for t in _AP_TYPES
    }
    return {
        "data": candidate.get("data", baseline.get("data")),
        "baseline": dict(baseline),
        "candidate": dict(candidate),
        "difference": difference,
        "classes": {
            "kept": kept,
            "added": [n for n in new_classes if n not in old_classes],
            "dropped": [n for n in old_classes if n not in new_classes],
        },
        "kept_classes": shared,
    }


def _num(value: Any, signed: bool = False) -> str:
    if value is None or not isinstance(value, int | float):
        return "-"
    if value < 0 and not signed:
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def format_table(result: Mapping[str, Any]) -> str:
    """The comparison as aligned text: overall metrics, then AP per class."""
    old, new, diff = result["baseline"], result["candidate"], result["difference"]
    rows: list[tuple[str, ...]] = [("metric", "baseline", "candidate", "change")]
    for group in _GROUPS:
        for key, change in diff.get(group, {}).items():
            rows.append(
                (f"{group}.{key}", _num(old[group][key]), _num(new[group][key]), _num(change, True))
            )
    shared = result["kept_classes"]
    for t in _AP_TYPES:
        rows.append(
            (
                f"{t}.AP (classes both have)",
                _num(shared["baseline"][t]),
                _num(shared["candidate"][t]),
                _num(shared["difference"][t], True),
            )
        )
    lines = [f"baseline:  {old.get('weights', '?')}", f"candidate: {new.get('weights', '?')}", ""]
    lines += _aligned(rows)
    lines += ["", "per class: mask AP (box AP)"]
    per_rows: list[tuple[str, ...]] = [("class", "instances", "baseline", "candidate", "change")]
    old_pc, new_pc = old.get("per_class", {}), new.get("per_class", {})
    for name, change in diff["per_class"].items():
        o, n = old_pc.get(name), new_pc.get(name)
        count = (n or o or {}).get("instances", "-")
        per_rows.append(
            (
                name,
                str(count),
                _pair(o) if o else "(absent)",
                _pair(n) if n else "(absent)",
                f"{_num(change['segm'], True)} ({_num(change['bbox'], True)})",
            )
        )
    lines += _aligned(per_rows)
    return "\n".join(lines)


def _pair(scores: Mapping[str, Any]) -> str:
    return f"{_num(scores.get('segm'))} ({_num(scores.get('bbox'))})"


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
