"""Config fields whose values come from a registry.

A registry (architectures, backends, precisions, ...) is the one list of
what exists; the config's ``Literal`` types and its "unknown X" messages are
built from it here, so that the schema, the validators and the CLI choices
cannot disagree with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

__all__ = ["check_choice", "literal_of"]


def literal_of(names: Iterable[str]) -> Any:
    """``Literal[name, ...]`` of a registry's names (a type for pydantic fields)."""
    values = tuple(names)
    if not values:
        raise ValueError("a registry is empty")
    return Literal[values]


def check_choice(what: str, value: Any, names: Iterable[str]) -> Any:
    """``value`` when it is one of ``names``; else a ``ValueError`` listing them.

    Used as a ``mode="before"`` validator ahead of a :func:`literal_of`
    field, so the message names the registry (``unknown arch 'x'; valid:
    ...``) rather than pydantic's generic literal error.
    """
    valid = tuple(names)
    if isinstance(value, str) and value not in valid:
        raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(map(repr, valid))}")
    return value
