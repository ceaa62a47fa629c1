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
from typing import Any

__all__ = ["load", "split_target"]


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
