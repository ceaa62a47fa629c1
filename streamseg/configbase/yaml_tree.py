"""Reading YAML config files with ruamel.yaml's round-trip loader, which keeps line numbers.

The one YAML reader of pipeline.yaml and training configs: ``read_yaml``
(a file) and ``parse_yaml`` (text) give the ruamel tree, ``apply_overrides``
sets ``--set section.field=value`` items in it, ``to_plain`` makes a plain
copy (dicts, lists, scalars) with ``${ENV}`` references substituted, and
``line_of`` finds the line of a field path in the tree.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from streamseg.configbase.env import UnsetVariable, interpolate
from streamseg.configbase.errors import ConfigError, ConfigIssue, Loc

__all__ = ["apply_overrides", "line_of", "parse_yaml", "read_yaml", "to_plain"]


def read_yaml(path: Path, *, what: str) -> Any:
    """The ruamel tree of the YAML mapping in ``path`` (an empty file is ``{}``).

    Raises:
        ConfigError: the file is missing or unreadable, is not YAML, or its
            top level is not a mapping. ``what`` (e.g. ``"a pipeline.yaml"``)
            goes into the hint for a missing file.
    """
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        issue = ConfigIssue("file not found", hint=f"pass the path of {what}")
        raise ConfigError(name, [issue]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ConfigError(name, [ConfigIssue(f"cannot read the file: {exc}")]) from None
    tree, issues = parse_yaml(text)
    if issues:
        raise ConfigError(name, issues)
    if tree is None:
        tree = CommentedMap()
    if not isinstance(tree, Mapping):
        hint = "a mapping of sections, one `name:` per line"
        raise ConfigError(name, [ConfigIssue("the top level must be a mapping", line=1, hint=hint)])
    return tree


def apply_overrides(tree: Any, overrides: Sequence[str]) -> list[ConfigIssue]:
    """Set ``dotted.key=value`` items (value parsed as YAML) in ``tree``; the problems.

    Missing sections are created. A value replacing one from the file keeps
    that line, so errors about it point there.
    """
    issues: list[ConfigIssue] = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            issues.append(ConfigIssue(f"--set {item!r} must look like section.field=value"))
            continue
        parts = key.split(".")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, CommentedMap()) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            issues.append(ConfigIssue(f"--set {item!r}: {'.'.join(parts[:-1])} is not a section"))
            continue
        try:
            node[parts[-1]] = YAML(typ="safe").load(io.StringIO(raw))
        except YAMLError as exc:
            what = str(exc).split("\n")[0]
            issues.append(ConfigIssue(f"--set {item!r}: the value is not valid YAML ({what})"))
    return issues


def parse_yaml(text: str) -> tuple[Any, list[ConfigIssue]]:
    """Parse YAML text; on a syntax error return ``(None, [issue])``."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        return yaml.load(text), []
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        what = what.split("\n")[0]
        hint = (
            "keys must be unique in a mapping"
            if "duplicate key" in what
            else "check indentation, colons and quotes"
        )
        return None, [ConfigIssue(f"YAML syntax error: {what}", line=line, hint=hint)]
    except YAMLError as exc:
        return None, [ConfigIssue(f"YAML error: {exc}")]


def to_plain(
    node: Any, environ: Mapping[str, str], loc: Loc = (), issues: list[ConfigIssue] | None = None
) -> Any:
    """A plain-Python copy of a ruamel tree with ``${ENV}`` substituted in strings.

    Problems (unset variables, malformed references) are appended to ``issues``.
    """
    issues = [] if issues is None else issues
    if isinstance(node, CommentedMap | dict):
        return {str(k): to_plain(v, environ, (*loc, str(k)), issues) for k, v in node.items()}
    if isinstance(node, CommentedSeq | list):
        return [to_plain(v, environ, (*loc, i), issues) for i, v in enumerate(node)]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        try:
            return interpolate(str(node), environ)
        except UnsetVariable as exc:
            issues.append(
                ConfigIssue(
                    f"environment variable {exc.name} is not set",
                    loc=loc,
                    hint=f"export {exc.name}=... or write ${{{exc.name}:-default}}",
                )
            )
        except ValueError as exc:
            issues.append(ConfigIssue(str(exc), loc=loc, hint="write ${NAME} or ${NAME:-default}"))
        return str(node)
    if isinstance(node, datetime.date | datetime.datetime):
        return node.isoformat()
    return node


def line_of(tree: Any, loc: Loc, *, key_line: bool = False) -> int | None:
    """The 1-based line of ``loc`` in the ruamel tree (the deepest part that exists).

    ``key_line``: for a mapping key, the line of the key itself (an unknown
    key) rather than of its value.
    """
    line = None
    node = tree
    for depth, part in enumerate(loc):
        last = depth == len(loc) - 1
        pos = _child_pos(node, part, key=last and key_line)
        if pos is None:
            break
        line = pos + 1
        node = node[part]
    if line is None and isinstance(tree, CommentedMap | CommentedSeq):
        return int(tree.lc.line or 0) + 1
    return line


def _child_pos(node: Any, part: str | int, *, key: bool) -> int | None:
    if isinstance(node, CommentedMap) and isinstance(part, str) and part in node:
        if part not in (node.lc.data or {}):  # set by --set or the console, not read from the file
            return None
        line, _col = node.lc.key(part) if key else node.lc.value(part)
        if not key and isinstance(node[part], CommentedMap | CommentedSeq):
            line = node.lc.key(part)[0]  # a block starts on the key's line
        return int(line)
    if isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
        if part not in (node.lc.data or {}):  # added by the console, not read from the file
            return None
        return int(node.lc.item(part)[0])
    return None
