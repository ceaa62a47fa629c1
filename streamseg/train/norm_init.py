"""Data-dependent initialisation of frozen batch norm, for training from scratch.

Detection backbones use *frozen* batch norm (fixed statistics, nothing
trained), which suits fine-tuning pretrained weights with small batches. A
backbone trained from scratch starts with those statistics at ``mean 0,
var 1``: the norms do nothing and activations grow through the residual
stages. :func:`init_frozen_norms` sets each norm's statistics from a forward
pass over real training images instead, in execution order, so that every
norm's output starts at zero mean and unit variance per channel (the same
idea as LSUV or data-dependent weight-norm initialisation). The statistics
are buffers, so checkpoints carry them and resume restores them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["frozen_norms", "init_frozen_norms"]


def frozen_norms(model: nn.Module) -> list[nn.Module]:
    """The frozen batch norms of ``model``'s backbone: modules named ``FrozenBatchNorm2d``
    whose ``running_mean`` / ``running_var`` are buffers (not trained)."""
    root = getattr(model, "backbone", model)
    return [
        m
        for m in root.modules()
        if type(m).__name__ == "FrozenBatchNorm2d"
        and isinstance(getattr(m, "running_var", None), Tensor)
        and not any(p.requires_grad for p in m.parameters(recurse=False))
    ]


@torch.no_grad()
def init_frozen_norms(model: nn.Module, images: Tensor) -> int:
    """Set the statistics of every frozen norm of ``model.backbone`` from ``images``.

    Args:
        model: a model with a ``backbone`` taking ``float32 (B, 3, H, W)``.
        images: normalised, padded model input (a few training images).

    Returns:
        how many norms were set (0 when the backbone has none).
    """
    norms = frozen_norms(model)
    if not norms:
        return 0

    def set_stats(module: nn.Module, args: tuple[Any, ...]) -> None:
        x = args[0].float()
        buffers = dict(module.named_buffers(recurse=False))
        buffers["running_mean"].copy_(x.mean(dim=(0, 2, 3)))
        buffers["running_var"].copy_(x.var(dim=(0, 2, 3), unbiased=False))
        buffers["weight"].fill_(1.0)
        buffers["bias"].zero_()

    handles = [m.register_forward_pre_hook(set_stats) for m in norms]
    was_training = model.training
    try:
        model.eval()
        getattr(model, "backbone", model)(images)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return len(norms)
