"""The cross-reference checks of a pipeline.yaml, worded once.

``PipelineConfig.reference_issues`` runs them on the validated config;
``check``'s salvage of a refused file (:mod:`streamseg.config.salvage`)
runs them on the plain data of the parts it can read. Both hand in plain
values, so a message and its hint read the same either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from streamseg.configbase.errors import ConfigIssue, Loc

__all__ = ["camera_id_issues", "class_issues"]


def camera_id_issues(ids: Sequence[str], named: Iterable[tuple[Loc, Any]]) -> list[ConfigIssue]:
    """A camera id named at a place (``(loc, id)`` pairs) that no camera in ``ids`` has."""
    hint = f"use a camera id from `cameras:` ({', '.join(ids)})"
    return [
        ConfigIssue(f"no camera has id {cid!r}", loc=loc, hint=hint)
        for loc, cid in named
        if cid not in ids
    ]


def class_issues(
    where: Loc, rules: Iterable[tuple[int, Iterable[Any], Any]], names: Sequence[str]
) -> list[ConfigIssue]:
    """Rule ``classes`` and ``region`` outside ``names`` (``model.class_names``, background
    first) of the camera section at ``where``; ``rules``: ``(index, classes, region)``."""
    known = names[1:]
    hint = f"model.class_names has: {', '.join(known)}"
    issues = []
    for i, classes, region in rules:
        issues += [
            ConfigIssue(f"unknown class {cls!r}", loc=(*where, "rules", i, "classes", j), hint=hint)
            for j, cls in enumerate(classes)
            if isinstance(cls, str) and cls not in known
        ]
        if isinstance(region, str) and region not in known:
            loc: Loc = (*where, "rules", i, "region")
            issues.append(ConfigIssue(f"unknown class {region!r}", loc=loc, hint=hint))
    return issues
