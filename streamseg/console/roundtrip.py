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

The blank lines and comments between two entries (and after a block's last
one, before what follows it) are kept by ruamel as a comment on the end of
the entry above, so removing or replacing that entry would take them away,
and an entry added after it would come before them. ``LineGaps`` notes each
such gap by the entry it stands *before* (or the block's end) and puts it
back there after the edit: removing the last camera keeps the blank line
before ``model:``, adding one puts the new camera above that line.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import io
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

__all__ = ["LineGaps", "dump", "guess_indent", "merge_edit", "round_trip_yaml"]


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


_END = "<end>"  # the anchor of the gap after a block's last entry
_Slot = tuple[Any, Any, int]  # (container, key or index, position in its ca.items entry)


class LineGaps:
    """The gaps (blank lines, comment lines) between the entries of every block
    of a ruamel tree, each noted by the entry it comes before; ``restore``
    puts them back there after an edit (see the module docstring)."""

    def __init__(self, tree: Any) -> None:
        self._nodes = list(_blocks(tree))  # held, so that no id() is reused meanwhile
        self._gaps = {
            (id(node), anchor): _tail(_token(slot))
            for node in self._nodes
            for anchor, slot in _ends(node)
            if anchor is not None and slot is not None
        }
        self._known = {id(node) for node in self._nodes}

    def restore(self, tree: Any) -> None:
        """Give each gap back to the entry now above its anchor; an entry that now
        stands before a new neighbour loses the gap it had. Outer blocks first: a
        block's end is also its last entry's end, and the outer one says what follows."""
        done: set[tuple[int, Any, int]] = set()
        for node in _blocks(tree):
            if id(node) not in self._known:
                continue
            for anchor, slot in _ends(node):
                if anchor is None or slot is None or (id(slot[0]), slot[1], slot[2]) in done:
                    continue
                done.add((id(slot[0]), slot[1], slot[2]))
                _set_tail(slot, self._gaps.get((id(node), anchor), ""))


def _blocks(node: Any) -> Iterator[Any]:
    """Every block-style mapping and sequence in ``node``, outer ones first."""
    if not isinstance(node, CommentedMap | CommentedSeq) or node.fa.flow_style():
        return
    yield node
    for child in node.values() if isinstance(node, CommentedMap) else node:
        yield from _blocks(child)


def _ends(node: Any) -> Iterator[tuple[Any, _Slot | None]]:
    """For each entry of ``node``: the anchor of the gap after it (the next entry's
    key, or id for a sequence's mapping or list; ``_END`` for the last) and the
    comment slot ruamel keeps that gap in."""
    keys = list(node) if isinstance(node, CommentedMap) else list(range(len(node)))
    for k, key in enumerate(keys):
        if k + 1 == len(keys):
            anchor: Any = _END
        elif isinstance(node, CommentedMap):
            anchor = keys[k + 1]
        else:
            after = node[keys[k + 1]]
            anchor = id(after) if isinstance(after, CommentedMap | CommentedSeq) else None
        yield anchor, _end_slot(node, key)


def _end_slot(node: Any, key: Any) -> _Slot | None:
    """Where the comment after the last line of ``node[key]`` is kept (``None``: where
    ruamel keeps it elsewhere, after a flow collection)."""
    child = node[key]
    if isinstance(child, CommentedMap | CommentedSeq) and len(child):
        if child.fa.flow_style():
            return None
        return _end_slot(
            child, list(child)[-1] if isinstance(child, CommentedMap) else -1 + len(child)
        )
    return node, key, 2 if isinstance(node, CommentedMap) else 0


def _token(slot: _Slot) -> Any:
    entry = slot[0].ca.items.get(slot[1])
    return entry[slot[2]] if entry else None


def _tail(token: Any) -> str:
    """A comment token's lines after the one it ends (its end-of-line comment)."""
    return "" if token is None else str(token.value).partition("\n")[2]


def _set_tail(slot: _Slot, tail: str) -> None:
    token = _token(slot)
    if _tail(token) == tail:
        return
    if token is None:
        from ruamel.yaml.error import CommentMark
        from ruamel.yaml.tokens import CommentToken

        token = CommentToken("\n", CommentMark(0), None)
    else:
        token = copy.copy(token)
    head = str(token.value).partition("\n")[0] + "\n"
    entry = slot[0].ca.items.setdefault(slot[1], [None, None, None, None])
    entry[slot[2]] = None if head == "\n" and not tail else token
    token.value = head + tail
