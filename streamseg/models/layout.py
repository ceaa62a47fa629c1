"""The memory layout of a model's weights."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["to_channels_last"]


def to_channels_last(model: nn.Module) -> nn.Module:
    """``model`` with its 4-D weights in channels-last (NHWC) layout, converted in place.

    Serving (``model.channels_last``), training (``solver.channels_last``),
    ``export`` and ``bench train`` convert with this one call.
    """
    # nn.Module.to takes memory_format, but no overload in torch's stubs lists it.
    return model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
