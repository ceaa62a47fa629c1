"""Segment: the Segmenter (preprocess, model, post-process) and compiled backends.

``Segmenter(arch=..., weights=..., device=..., precision=..., backend=...)``
turns a :class:`streamseg.types.FrameBatch` into one
:class:`streamseg.types.Instances` per frame. Importing this package loads no
model, compiles nothing and imports no torch (names are imported on first
use), so the config can read the backend registry
(:mod:`streamseg.segment.backends`) cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Segmenter", "load_model"]

if TYPE_CHECKING:
    from streamseg.segment.segmenter import Segmenter, load_model


def __getattr__(name: str) -> Any:
    if name in __all__:
        from streamseg.segment import segmenter

        return getattr(segmenter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
