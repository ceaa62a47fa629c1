"""Reading pipeline.yaml with ruamel.yaml's round-trip loader, which keeps line numbers.

``parse_yaml`` returns the ruamel tree (for line look-ups) and a plain copy
(dicts, lists, scalars) with ``${ENV}`` references substituted.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from streamseg.config.env import UnsetVariable, interpolate
from streamseg.config.errors import ConfigIssue, Loc

__all__ = ["line_of", "parse_yaml", "to_plain"]


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
        return int(tree.lc.line) + 1
    return line


def _child_pos(node: Any, part: str | int, *, key: bool) -> int | None:
    if isinstance(node, CommentedMap) and isinstance(part, str) and part in node:
        line, _col = node.lc.key(part) if key else node.lc.value(part)
        if not key and isinstance(node[part], CommentedMap | CommentedSeq):
            line = node.lc.key(part)[0]  # a block starts on the key's line
        return int(line)
    if isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
        return int(node.lc.item(part)[0])
    return None


def iter_mapping_items(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield str(k), v
