"""Re-exports ``streamseg.segment.config`` at its old path ``streamseg.config.model``.

New code imports ``streamseg.segment.config``; the stages never import this package.
"""

from __future__ import annotations

from streamseg.segment.config import (
    ArchName,
    BackendName,
    ModelConfig,
    ModelSource,
    PrecisionName,
    TaskName,
    arch_family,
    class_options,
)

__all__ = [
    "ArchName",
    "BackendName",
    "ModelConfig",
    "ModelSource",
    "PrecisionName",
    "TaskName",
    "arch_family",
    "class_options",
]
