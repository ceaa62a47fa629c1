"""YAML config files -> validated pydantic models, or every error at once.

The one loader of streamseg's YAML files: ``load_pipeline(path)`` reads a
pipeline.yaml into a ``PipelineConfig``; ``load_yaml_model(path, schema)``
reads any other config (``streamseg train``'s) into its schema. Both
substitute ``${ENV}`` references, and each problem becomes a ``ConfigIssue``
with the YAML line and the field path, for instance ``pipeline.yaml:12:
cameras[1].max_fps: Input should be greater than 0``. Messages never quote a
password or a URL (which may hold one).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from streamseg.config import salvage
from streamseg.config.paths import resolve_path, resolve_paths
from streamseg.config.pipeline import PipelineConfig
from streamseg.configbase.errors import ConfigError, ConfigIssue
from streamseg.configbase.issues import issue_from_pydantic
from streamseg.configbase.yaml_tree import apply_overrides, line_of, read_yaml, to_plain
from streamseg.segment.config import ModelSource

__all__ = [
    "load_pipeline",
    "load_section",
    "load_yaml_model",
    "resolve_path",
    "validate_pipeline",
    "validate_tree",
    "with_lines",
]

M = TypeVar("M", bound=pydantic.BaseModel)


def load_yaml_model(
    path: str | Path,
    schema: type[M],
    *,
    overrides: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    what: str = "a config file",
) -> M:
    """Read ``path``, apply ``--set`` ``overrides``, interpolate ``${ENV}``, validate.

    Args:
        path: the YAML file.
        schema: the pydantic model of the whole file.
        overrides: ``dotted.key=value`` items (value parsed as YAML) set on
            top of the file; errors then name the file ``PATH (with --set)``.
        environ: for ``${NAME}`` references (default ``os.environ``).
        what: names the file kind in the hint for a missing file.

    Raises:
        ConfigError: listing every problem, each with line, field and hint.
    """
    path = Path(path)
    tree = read_yaml(path, what=what)
    name = f"{path} (with --set)" if overrides else str(path)
    issues = apply_overrides(tree, overrides)
    if issues:
        raise ConfigError(name, issues)
    return validate_tree(tree, schema, name=name, environ=environ)


def validate_tree(
    tree: Any,
    schema: type[M],
    *,
    name: str,
    environ: Mapping[str, str] | None = None,
    extra_checks: Callable[[Any], list[ConfigIssue]] | None = None,
    config_checks: Callable[[M], list[ConfigIssue]] | None = None,
    fallback_checks: Callable[[Any, list[ConfigIssue]], list[ConfigIssue]] | None = None,
) -> M:
    """Validate a ruamel tree (from ``read_yaml``) as ``schema``; errors carry lines.

    ``extra_checks`` gets the plain data and returns further problems (they
    are reported together with the schema's, even when the schema fails);
    ``config_checks`` gets the validated config (references between sections);
    ``fallback_checks`` gets the plain data and the schema's issues when the
    schema fails, and makes what checks ``config_checks`` could not.
    """
    environ = os.environ if environ is None else environ
    env_issues: list[ConfigIssue] = []
    data = to_plain(tree, environ, (), env_issues)
    issues = [_with_line(i, tree) for i in env_issues]
    unset = {i.loc for i in env_issues}
    config = None
    try:
        config = schema.model_validate(data)
    except pydantic.ValidationError as exc:
        found = [issue_from_pydantic(err, tree, schema) for err in exc.errors()]
        # A value with an unset ${VAR} is reported as that, not as what its text is not.
        issues += [i for i in found if i.loc not in unset]
        if fallback_checks is not None:
            issues += [_with_line(i, tree) for i in fallback_checks(data, found)]
    if extra_checks is not None:
        issues += [_with_line(i, tree) for i in extra_checks(data)]
    if config is not None and config_checks is not None:
        issues += [_with_line(i, tree) for i in config_checks(config)]
    if issues or config is None:
        raise ConfigError(name, _dedupe(issues))
    return config


def load_pipeline(path: str | Path, *, environ: Mapping[str, str] | None = None) -> PipelineConfig:
    """Read, interpolate and validate a pipeline.yaml.

    Relative paths (model weights, video files) are resolved against the
    file's folder. Raises ``ConfigError`` listing every problem found.
    """
    path = Path(path)
    return validate_pipeline(read_yaml(path, what="a pipeline.yaml"), path, environ=environ)


def load_section(
    path: str | Path, key: str, schema: type[M], *, environ: Mapping[str, str] | None = None
) -> M:
    """Only the ``key:`` section of the pipeline.yaml ``path``, validated as ``schema``
    (its defaults when the file has none).

    The other sections are neither validated nor interpolated: ``subscribe
    --pipeline`` needs ``redis:`` and must not ask for the console's
    ``${STREAMSEG_HTTP_TOKEN}``. Errors carry the file's lines and
    ``key.field`` paths, as ``load_pipeline``'s do. Raises ``ConfigError``.
    """
    path = Path(path)
    tree = read_yaml(path, what="a pipeline.yaml")
    for other in [k for k in tree if k != key]:
        del tree[other]  # the line numbers of what is left stay as read
    field: Any = (schema, pydantic.Field(default_factory=schema))
    wrapper = pydantic.create_model(
        f"{key.title()}Section", __config__=pydantic.ConfigDict(extra="forbid"), **{key: field}
    )
    config = validate_tree(tree, wrapper, name=str(path), environ=environ)
    section: M = getattr(config, key)
    return section


def validate_pipeline(
    tree: Any,
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    checks: Callable[[PipelineConfig], list[ConfigIssue]] | None = None,
) -> PipelineConfig:
    """Validate the ruamel tree of the pipeline file ``path`` as ``load_pipeline`` does.

    The console validates its edits with this before applying them, with
    ``checks``: what the running service adds (the cameras' sources, the
    model's classes), given the config with its paths resolved; their
    issues are reported with the file's, with lines.
    """
    path = Path(path)

    def config_checks(config: PipelineConfig) -> list[ConfigIssue]:
        issues = config.reference_issues()
        if checks is not None and not issues:
            issues += checks(resolve_paths(config, path.parent))
        return issues

    config = validate_tree(
        tree,
        PipelineConfig,
        name=str(path),
        environ=environ,
        extra_checks=lambda data: _semantic_checks(data, path.parent),
        config_checks=config_checks,
        fallback_checks=salvage.reference_issues,
    )
    return resolve_paths(config, path.parent)


def with_lines(issues: Sequence[ConfigIssue], path: str | Path) -> list[ConfigIssue]:
    """``issues`` found after loading (the machine, the weights, the model) with the line
    of their field in the file ``path`` (``issues`` as they are if it cannot be read)."""
    try:
        tree = read_yaml(Path(path), what="a pipeline.yaml")
    except ConfigError:
        return list(issues)
    return [_with_line(i, tree) for i in issues]


def _semantic_checks(data: Any, base_dir: Path) -> list[ConfigIssue]:
    """Checks across fields, on the raw data so they run even when other fields are bad."""
    if not isinstance(data, Mapping):
        return []
    cameras = data.get("cameras")
    issues = _camera_checks(cameras if isinstance(cameras, list) else [], base_dir)
    model = data.get("model")
    if isinstance(model, Mapping):
        issues += _weights_check(model, base_dir)
        issues += _aot_package_check(model, base_dir)
    return issues


def _camera_checks(cameras: list[Any], base_dir: Path) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    seen: dict[str, int] = {}
    for i, cam in enumerate(cameras):
        if not isinstance(cam, Mapping):
            continue
        cid, url = cam.get("id"), cam.get("url")
        if isinstance(cid, str) and cid in seen:
            issues.append(
                ConfigIssue(
                    f"duplicate camera id {cid!r} (also cameras[{seen[cid]}])",
                    loc=("cameras", i, "id"),
                    hint="camera ids must be unique",
                )
            )
        if isinstance(cid, str):
            seen.setdefault(cid, i)
        if isinstance(url, str) and url.strip() and "://" not in url:
            # A plain path, relative to this file: whether it is there is read
            # here (the others at start-up, streamseg.cli.startup).
            who = cid if isinstance(cid, str) else f"cameras[{i}]"
            issues += _camera_exists(url, who, i, base_dir)
    return issues


def _camera_exists(url: str, camera_id: str, index: int, base_dir: Path) -> list[ConfigIssue]:
    """Whether the file or device a plain camera path names is there, as ingest
    decides (``SourceSpec.check_exists``, the one owner of the question: a
    bare ``/dev/videoN`` is a V4L2 device); relative paths start at the
    pipeline.yaml's folder. A bad URL is the URL validator's to report."""
    from streamseg.ingest.spec import SourceError, parse_source_url

    url = str(resolve_path(url.strip(), base_dir))
    try:
        spec = parse_source_url(url, camera_id=None)
    except SourceError:
        return []
    try:
        spec.check_exists(camera_id)
    except SourceError as exc:
        return [
            ConfigIssue(
                str(exc), loc=("cameras", index, "url"), hint=f"relative paths start at {base_dir}"
            )
        ]
    return []


def _weights_check(model: Mapping[str, Any], base_dir: Path) -> list[ConfigIssue]:
    weights = model.get("weights")
    if not isinstance(weights, str):
        return []
    catalogue = _catalogue_check(
        weights, model.get("arch", ModelSource.model_fields["arch"].default)
    )
    if catalogue is not None:
        return catalogue
    if model.get("missing_weights", "error") == "random":
        return []
    path = resolve_path(weights, base_dir)
    if path.exists():  # a file, or a Hugging Face model folder (Mask2Former)
        return []
    return [
        ConfigIssue(
            f"weights file not found: {path}",
            loc=("model", "weights"),
            hint="fix the path (relative to the pipeline.yaml), or set "
            "`missing_weights: random` to run a demo with random weights",
        )
    ]


def _catalogue_check(weights: str, arch: Any) -> list[ConfigIssue] | None:
    """Issues of a weights-catalogue name (``None``: ``weights`` is not one).

    Whether its file is downloaded is a start-up check (``serve --download``
    fetches it first); here only the architecture must fit.
    """
    from streamseg.models.weights import CATALOGUE_ENV, CatalogueError, lookup

    try:
        entry = lookup(weights)
    except CatalogueError as exc:
        return [
            ConfigIssue(str(exc), loc=("model", "weights"), hint=f"fix or unset ${CATALOGUE_ENV}")
        ]
    if entry is None:
        return None
    if arch == entry.arch:
        return []
    return [
        ConfigIssue(
            f"catalogue weights {weights!r} are {entry.arch!r} weights, not {arch!r}",
            loc=("model", "arch"),
            hint=f"set `arch: {entry.arch}`",
        )
    ]


def _aot_package_check(model: Mapping[str, Any], base_dir: Path) -> list[ConfigIssue]:
    package = model.get("aot_package")
    if not isinstance(package, str) or model.get("backend") != "aot":
        return []
    path = resolve_path(package, base_dir)
    if path.is_file():
        return []
    return [
        ConfigIssue(
            f"aot_package not found: {path}",
            loc=("model", "aot_package"),
            hint="write it with `streamseg export --arch A --weights W --size HxW --batch N "
            "--out F.pt2` (path relative to the pipeline.yaml)",
        )
    ]


def _with_line(issue: ConfigIssue, tree: Any) -> ConfigIssue:
    if issue.line is not None or not issue.loc:
        return issue
    return ConfigIssue(issue.message, issue.loc, line_of(tree, issue.loc), issue.hint)


def _dedupe(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    out: list[ConfigIssue] = []
    for issue in issues:
        if issue not in out:
            out.append(issue)
    return out
