"""Segment: the Segmenter (preprocess, model, post-process) and compiled backends.

``Segmenter(arch=..., weights=..., device=..., precision=..., backend=...)``
turns a :class:`streamseg.types.FrameBatch` into one
:class:`streamseg.types.Instances` per frame. Importing this package loads no
model and compiles nothing.
"""

from streamseg.segment.segmenter import PRECISIONS, Segmenter, load_model

__all__ = ["PRECISIONS", "Segmenter", "load_model"]
