"""Load a YAML file into a pydantic model; errors name the field and the line.

>>> cfg = load_yaml_model("train.yaml", TrainConfig)   # doctest: +SKIP
ConfigError: train.yaml:12: solver.lr: Input should be greater than 0 (got -1)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["ConfigError", "load_yaml_model", "load_yaml_tree", "plain", "validate_tree"]

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A config file that cannot be used; the message has file, line and field."""


def load_yaml_model(path: str | Path, model: type[M]) -> M:
    """Parse ``path`` and validate it as ``model``.

    Raises:
        ConfigError: the file is missing, is not YAML, or a field is invalid;
            every invalid field is listed as ``file:line: dotted.path: message``.
    """
    return validate_tree(load_yaml_tree(path), model, source=str(path))


def load_yaml_tree(path: str | Path) -> Any:
    """The YAML document of ``path`` as ruamel's commented mapping (keeps lines)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        tree = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if tree is None:
        tree = {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping of sections")
    return tree


def validate_tree(tree: Any, model: type[M], *, source: str) -> M:
    """Validate a tree from :func:`load_yaml_tree`; errors carry ``source:line``."""
    try:
        return model.model_validate(plain(tree))
    except ValidationError as exc:
        raise ConfigError(_describe(source, tree, exc)) from None


def plain(node: Any) -> Any:
    """ruamel's commented containers and scalars -> plain dicts, lists, numbers, strings.

    ruamel's scalars (``ScalarFloat``, ...) must not reach checkpoints: values
    of ``model.options`` go into their meta, and ``torch.load(weights_only=True)``
    refuses classes it does not know.
    """
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    for kind in (bool, int, float, str):  # bool first: it is an int
        if isinstance(node, kind):
            return kind(node)
    return node


def _describe(path: str, tree: Any, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        field = ".".join(str(p) for p in loc) or "(top level)"
        line = _line_of(tree, loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check its spelling and the section it is in)"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {err['input']!r})"
        lines.append(f"{path}:{line}: {field}: {msg}")
    return "invalid config:\n  " + "\n  ".join(lines)


def _line_of(tree: Any, loc: Sequence[Any]) -> int:
    """1-based line of the deepest part of ``loc`` found in ``tree``."""
    line = 1
    node = tree
    for part in loc:
        lc = getattr(node, "lc", None)
        if isinstance(node, dict) and part in node:
            if lc is not None:
                line = lc.key(part)[0] + 1
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            if lc is not None:
                line = lc.item(part)[0] + 1
            node = node[part]
        else:
            break
    return line
