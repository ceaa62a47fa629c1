"""Lazy registry rows: code named as ``"module:attribute"``, imported on first use.

Every kind of plug-in has one table (architectures, backends, URL schemes,
rule kinds, sinks, ...; docs/architecture.md, "Registries"). A row names its
code as a string, so that importing a table imports no plug-in (and no
torch); :func:`load` turns the string into the object when the row is used.
A table of decoders, or of anything else, uses it the same way::

    DECODERS = {"pyav": "streamseg.ingest.decoders:PyAVDecoder"}
    decoder_class = load(DECODERS[name])

Example:
    >>> load("os.path:join")("a", "b")
    'a/b'
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

__all__ = ["RegistryClosed", "Table", "load", "split_target"]

T = TypeVar("T")


def split_target(target: str) -> tuple[str, str]:
    """``("module", "attribute")`` of ``"module:attribute"``; ``ValueError`` when it is not one."""
    module, sep, attribute = target.partition(":")
    if not (sep and module and attribute) or ":" in attribute:
        raise ValueError(f"a registry row names its code as 'module:attribute', got {target!r}")
    return module, attribute


def load(target: str) -> Any:
    """The object ``target`` (``"package.module:attribute"``) names, its module imported now.

    Importing is Python's (``sys.modules`` keeps each module once), so a row
    costs one import the first time and a dictionary lookup after.
    """
    module, attribute = split_target(target)
    return getattr(importlib.import_module(module), attribute)


class RegistryClosed(RuntimeError):
    """A row registered after a config type or CLI choice was built from its table."""


class Table(dict[str, T]):
    """A registry table: ``name -> row``, that takes rows until a type is built from it.

    Config types (a ``Literal`` of the names, a ``type``-tagged union of the
    rows' models) are built from a table once, when their module is
    imported; :meth:`close` marks that moment, and a row registered later
    would be missing from them, so :meth:`register` refuses it with a
    message saying where rows belong: in a module named in
    ``STREAMSEG_PLUGINS`` (:mod:`streamseg.plugins`), which streamseg loads
    before any such type is built.

    Example:
        >>> t = Table("colour", {"red": 1})
        >>> t.register("blue", 2)
        >>> list(t.close("the palette"))
        ['red', 'blue']
    """

    def __init__(self, what: str, rows: dict[str, T] | None = None) -> None:
        super().__init__(rows or {})
        self.what = what
        self.closed_by: str | None = None

    def register(self, name: str, row: T) -> None:
        """Add ``row`` as ``name``; ``ValueError`` when the name is taken,
        :class:`RegistryClosed` when a type was already built from the table."""
        if self.closed_by is not None:
            raise RegistryClosed(
                f"{self.what} {name!r} is registered too late: {self.closed_by} was already "
                f"built from the {self.what} table without it; register it in a module named "
                "in STREAMSEG_PLUGINS (loaded when streamseg is imported), and do not import "
                f"{self.closed_by} from that module"
            )
        if name in self:
            raise ValueError(f"{self.what} {name!r} is already registered")
        self[name] = row

    def close(self, by: str) -> Table[T]:
        """Mark that ``by`` (a module) builds its types from the table now; the table."""
        if self.closed_by is None:
            self.closed_by = by
        return self
