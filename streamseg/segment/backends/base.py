"""What every backend offers the Segmenter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

__all__ = ["Backend", "EagerBackend", "build"]


class Backend:
    """The base: eager PyTorch; compiled backends override what they change.

    Attributes:
        name: ``eager``, ``inductor``, ``aot`` or ``tensorrt``.
    """

    name = "eager"

    def input_size(self, padded: tuple[int, int]) -> tuple[int, int] | None:
        """The fixed ``(H, W)`` to pad a batch whose own padded size is ``padded`` to.

        ``None``: no fixed size (eager). Raises ``ValueError`` when the frames
        are too large for a compiled model.
        """
        return None

    def warm_up_frame(self, min_size: int, max_size: int) -> tuple[int, int]:
        """``(H, W)`` of the frame to warm up with: the model's largest landscape input.

        A compiled backend that grows its fixed size to the largest batch it
        has seen is then sized for every landscape camera at once.
        """
        return (min_size, max_size)

    def weights_loaded(self, state: Mapping[str, Tensor]) -> None:
        """Called after new weights were copied into the model (hot swap)."""

    def close(self) -> None:
        """Release what the backend holds (compiled code, packages)."""


class EagerBackend(Backend):
    """Plain PyTorch: nothing to compile."""


def build(model: Any, **_: Any) -> EagerBackend:
    """The ``eager`` entry of the backend registry: nothing to set up."""
    return EagerBackend()
