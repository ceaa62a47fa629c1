"""``LoadedWeights``: a Mask R-CNN state dict in our key names, whatever file it came from.

:func:`streamseg.models.maskrcnn.weights.read_weights` makes one from a
torchvision ``.pth`` or a streamseg checkpoint,
:func:`streamseg.models.maskrcnn.detectron2.read_detectron2` from a
detectron2 ``.pkl``; ``load_weights`` puts it into a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from torch import Tensor

from streamseg.models import InputSpec

__all__ = ["LoadedWeights"]


@dataclasses.dataclass(frozen=True)
class LoadedWeights:
    """A state dict in our key names, with what the file says about its model.

    Attributes:
        state_dict: the tensors, under our key names.
        source: the file and its format, for messages.
        class_names: the classes the file was trained for, if it says.
        input_spec: how the file's model wants its input, if it says.
        style: ``"torchvision"`` or ``"detectron2"``, if the file says.
        key_name: shows one of our keys under the file's own naming in
            error messages (``None``: the file uses our names).
    """

    state_dict: dict[str, Tensor]
    source: str
    class_names: tuple[str, ...] | None = None
    input_spec: InputSpec | None = None
    style: str | None = None
    key_name: Callable[[str], str] | None = None
