"""Writing an edited pipeline.yaml back so that only the lines the edit is about change.

A YAML round trip (ruamel.yaml) keeps comments and key order, but its
writer has a style of its own: it wraps long lines, normalises indentation
and spacing inside flow collections, and may leave trailing spaces. Written
whole, a file edited on one line comes back changed on many others. So the
editor never writes the round trip's text as it is; ``merge_edit`` takes
three texts:

* ``original``: the file as it is on disk;
* ``base``: the round trip's writing of the file's tree *before* the edit;
* ``edited``: its writing of the tree *after* the edit.

``base`` and ``edited`` come from the same writer, so the lines where they
differ are exactly the edit. Those differences are carried over to
``original`` through an alignment of ``original`` with ``base`` (difflib):
lines the writer left alone map one to one; a run of lines it restyled maps
as a block, and an edit touching such a block replaces the whole block.
Everything else in ``original`` is kept byte for byte. ``PipelineEditor``
checks that the result reads back as the edited tree, and else writes the
round trip's text (a restyled file, never a wrong one).
"""

from __future__ import annotations

import dataclasses
import difflib
import io
from typing import Any

from ruamel.yaml import YAML

__all__ = ["dump", "guess_indent", "merge_edit", "round_trip_yaml"]


def round_trip_yaml(text: str) -> YAML:
    """A round-trip YAML that keeps quotes and writes with the indentation ``text`` uses."""
    mapping, offset = guess_indent(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never wrap a line
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    return yaml


def guess_indent(text: str) -> tuple[int, int]:
    """``(mapping indent, offset of a sequence's dash under its key)`` of block YAML
    ``text``, from its first nested mapping and its first block sequence (2 and 0
    when it has none)."""
    mapping = offset = None
    parent: tuple[int, str] | None = None  # indentation and text of the last content line
    for raw in text.splitlines():
        line = raw.rstrip()
        body = line.lstrip()
        if not body or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        if parent is not None and parent[1].endswith(":") and indent > parent[0]:
            if body.startswith("- ") or body == "-":
                offset = indent - parent[0] if offset is None else offset
            elif mapping is None:
                mapping = indent - parent[0]
        if mapping is not None and offset is not None:
            break
        parent = (indent, line.split(" #")[0].rstrip())
    return mapping or 2, offset or 0


def dump(tree: Any, yaml: YAML) -> str:
    buf = io.StringIO()
    yaml.dump(tree, buf)
    return buf.getvalue()


@dataclasses.dataclass(frozen=True)
class _Unit:
    """Lines ``base[b0:b1]`` that stand for ``original[o0:o1]`` (one line each when
    the writer left them alone, a block when it restyled them)."""

    b0: int
    b1: int
    o0: int
    o1: int


def merge_edit(original: str, base: str, edited: str) -> str:
    """``original`` with the changes from ``base`` to ``edited`` (see the module docstring)."""
    o, b, e = (t.splitlines(keepends=True) for t in (original, base, edited))
    units = _align(o, b)
    hunks = _hunks(b, e, units)
    out: list[str] = []
    at = 0  # next base line to copy
    for b0, b1, e0, e1 in hunks:
        out += _original_of(units, at, b0, o)
        out += e[e0:e1]
        at = b1
    out += _original_of(units, at, len(b), o)
    return "".join(out)


def _align(o: list[str], b: list[str]) -> list[_Unit]:
    units: list[_Unit] = []
    matcher = difflib.SequenceMatcher(None, o, b, autojunk=False)
    for tag, o0, o1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            units += [_Unit(b0 + k, b0 + k + 1, o0 + k, o0 + k + 1) for k in range(b1 - b0)]
        else:
            units.append(_Unit(b0, b1, o0, o1))
    return units


def _hunks(b: list[str], e: list[str], units: list[_Unit]) -> list[tuple[int, int, int, int]]:
    """The edit's changes ``(b0, b1, e0, e1)``, widened to whole units and merged."""
    matcher = difflib.SequenceMatcher(None, b, e, autojunk=False)
    widened: list[tuple[int, int, int, int]] = []
    for tag, b0, b1, e0, e1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lo, hi = b0, b1
        for u in units:  # a restyled block the change cuts into is replaced whole
            cut = u.b0 < lo < u.b1 if lo == hi else u.b0 < hi and u.b1 > lo
            if cut and (u.b0 < lo or u.b1 > hi):
                lo, hi = min(lo, u.b0), max(hi, u.b1)
        # Outside the changes base and edited are equal, line for line.
        widened.append((lo, hi, e0 - (b0 - lo), e1 + (hi - b1)))
    merged: list[tuple[int, int, int, int]] = []
    for h in sorted(widened):
        if merged and h[0] < merged[-1][1]:
            last = merged[-1]
            end = h if h[1] >= last[1] else last
            merged[-1] = (last[0], end[1], last[2], end[3])
        else:
            merged.append(h)
    return merged


def _original_of(units: list[_Unit], b0: int, b1: int, o: list[str]) -> list[str]:
    """The original lines standing for ``base[b0:b1]`` (blocks the writer dropped
    included, where they fall inside)."""
    out: list[str] = []
    for u in units:
        inside = b0 <= u.b0 < b1 if u.b1 > u.b0 else b0 < u.b0 <= b1 or (u.b0 == b0 == 0)
        if inside:
            out += o[u.o0 : u.o1]
    return out
