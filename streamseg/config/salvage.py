"""The cross-references of a pipeline.yaml the schema refused, so that one run lists all.

The schema's own cross-checks (a rule's zone and line names, rule sections
of cameras that do not exist, rule classes outside ``model.class_names``)
run on the validated config, so they cannot run when a field anywhere is
wrong: a missing ``dwell.seconds`` would hide an unknown zone, which would
hide a rule section for a camera that is not there. ``reference_issues``
makes the same checks on the plain data of such a file, wherever the parts
they compare are themselves readable, through the same functions as the
schema's (:mod:`streamseg.config.references`), so with the same messages and
fields. It skips what the schema did report (a camera section whose
own checks ran), so nothing is reported twice. ``valid_parts`` gives the
sections that are valid alone, for the checks ``check`` makes after the
file's (the machine, the cameras' sources, the model and its classes).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from streamseg.config.paths import resolve_camera_path, resolve_model_paths
from streamseg.config.references import camera_id_issues, class_issues
from streamseg.config.runtime import RuntimeConfig
from streamseg.configbase.errors import ConfigIssue
from streamseg.configbase.yaml_tree import read_yaml, to_plain
from streamseg.ingest.config import CameraConfig
from streamseg.segment.config import ModelConfig
from streamseg.track.alerts import AlertsConfig, CameraAlerts

__all__ = ["ValidParts", "reference_issues", "valid_parts"]

M = TypeVar("M", bound=pydantic.BaseModel)


def reference_issues(data: Any, found: Sequence[ConfigIssue]) -> list[ConfigIssue]:
    """Issues of ``data`` (the plain file) that ``found`` (the schema's) could not include."""
    if not isinstance(data, Mapping):
        return []
    alerts = data.get("alerts")
    sections = alerts.get("cameras") if isinstance(alerts, Mapping) else None
    if not isinstance(sections, Mapping):
        return []
    issues = _camera_ids(data.get("cameras"), sections)
    names = _class_names(data.get("model"))
    for cid, section in sections.items():
        if not isinstance(section, Mapping):
            continue
        where = ("alerts", "cameras", str(cid))
        if not any(i.loc == where for i in found):  # its own checks did not run
            issues += _shape_names(where, section)
        if names is not None:
            issues += _classes(where, section, names)
    return issues


def _camera_ids(cameras: Any, sections: Mapping[str, Any]) -> list[ConfigIssue]:
    if not isinstance(cameras, list):
        return []
    found = [c.get("id") for c in cameras if isinstance(c, Mapping)]
    if not all(isinstance(i, str) for i in found):
        return []  # an id is missing: which camera a section means is unclear
    ids = [str(i) for i in found]
    return camera_id_issues(ids, [(("alerts", "cameras", cid), cid) for cid in sections])


def _rules(section: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    rules = section.get("rules")
    if not isinstance(rules, list):
        return []
    return [(i, r) for i, r in enumerate(rules) if isinstance(r, Mapping)]


def _shape_names(where: tuple[str, ...], section: Mapping[str, Any]) -> list[ConfigIssue]:
    """A rule's ``zone`` or ``line`` that the section does not define."""
    issues = []
    for i, rule in _rules(section):
        for kind in ("zone", "line"):
            name, defined = rule.get(kind), section.get(f"{kind}s") or {}
            if not isinstance(name, str) or not isinstance(defined, Mapping) or name in defined:
                continue
            known = f"defined: {', '.join(map(str, defined))}" if defined else "none is defined"
            issues.append(
                ConfigIssue(
                    f"rules[{i}] ({rule.get('name')!r}): unknown {kind} {name!r} ({known})",
                    loc=(*where, "rules", i, kind),
                )
            )
    return issues


def _class_names(model: Any) -> list[str] | None:
    names = model.get("class_names") if isinstance(model, Mapping) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return names


def _classes(
    where: tuple[str, ...], section: Mapping[str, Any], names: list[str]
) -> list[ConfigIssue]:
    """Rule ``classes`` and ``region`` outside ``model.class_names``."""
    rules = []
    for i, rule in _rules(section):
        classes = rule.get("classes")
        rules.append((i, classes if isinstance(classes, list) else [], rule.get("region")))
    return class_issues(where, rules, names)


@dataclasses.dataclass(frozen=True)
class ValidParts:
    """The sections of a refused pipeline.yaml that are valid on their own, with their
    paths resolved as ``load_pipeline`` resolves them: what start-up's checks can
    still look at (``streamseg check`` lists their problems with the file's).

    ``cameras``: ``(index in cameras:, camera)``; ``alerts``: the camera
    sections that are valid.
    """

    cameras: list[tuple[int, CameraConfig]]
    model: ModelConfig | None
    runtime: RuntimeConfig | None
    alerts: AlertsConfig


def valid_parts(path: str | Path, *, environ: Mapping[str, str] | None = None) -> ValidParts:
    """Each section of the file at ``path`` validated alone (``ConfigError`` if unreadable)."""
    path = Path(path)
    data = to_plain(read_yaml(path, what="a pipeline.yaml"), environ or os.environ, (), [])
    data = data if isinstance(data, Mapping) else {}
    cameras = []
    listed = data.get("cameras")
    for i, raw in enumerate(listed if isinstance(listed, list) else []):
        cam = _valid(CameraConfig, raw)
        if cam is not None:
            cameras.append((i, resolve_camera_path(cam, path.parent)))
    model = _valid(ModelConfig, data.get("model", {}))
    if model is not None:
        model = resolve_model_paths(model, path.parent)
    alerts = data.get("alerts", {})
    sections = alerts.get("cameras") if isinstance(alerts, Mapping) else None
    valid = {
        str(cid): section
        for cid, raw in (sections.items() if isinstance(sections, Mapping) else ())
        if (section := _valid(CameraAlerts, raw)) is not None
    }
    return ValidParts(
        cameras=cameras,
        model=model,
        runtime=_valid(RuntimeConfig, data.get("runtime", {})),
        alerts=AlertsConfig(cameras=valid),
    )


def _valid(schema: type[M], raw: Any) -> M | None:
    try:
        return schema.model_validate(raw if raw is not None else {})
    except (pydantic.ValidationError, ValueError, TypeError):
        return None
