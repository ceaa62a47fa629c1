"""Freezing the first stages of a model's backbone.

Stage 0 is the stem (ResNet ``conv1``/``bn1``, Swin ``patch_embed``); stage
``k`` is ResNet's ``layer{k}`` or Swin's ``layers.{k-1}``. A model may
instead provide ``freeze_backbone_stages(n)`` itself, which is then used.
Normalisation statistics are the model's business (detection backbones use
frozen batch norm).
"""

from __future__ import annotations

import re

from torch import nn

__all__ = ["freeze_backbone_stages"]

_STEM = re.compile(r"(^|\.)backbone\.(?:.*\.)?(conv1|bn1|stem|patch_embed|embeddings)\.")
_STAGE = re.compile(r"(^|\.)backbone\.(?:.*\.)?(?:layer(\d)\.|(?:layers|stages)\.(\d+)\.)")


def stage_of(name: str) -> int | None:
    """Backbone stage (0 = stem) of parameter ``name``, or ``None`` outside one."""
    if _STEM.search(name):
        return 0
    m = _STAGE.search(name)
    if m is None:
        return None
    return int(m.group(2)) if m.group(2) is not None else int(m.group(3)) + 1


def freeze_backbone_stages(model: nn.Module, stages: int) -> list[str]:
    """Stop gradients of the stem and the first ``stages - 1`` backbone stages.

    Returns:
        names of the frozen parameters.

    Raises:
        ValueError: ``stages > 0`` but no parameter of the model looks like a
            backbone stage (an architecture this function does not know).
    """
    if stages <= 0:
        return []
    custom = getattr(model, "freeze_backbone_stages", None)
    if callable(custom):
        custom(stages)
        return [n for n, p in model.named_parameters() if not p.requires_grad]
    frozen = []
    for name, param in model.named_parameters():
        stage = stage_of(name)
        if stage is not None and stage < stages:
            param.requires_grad_(False)
            frozen.append(name)
    if not frozen:
        raise ValueError(
            "model.freeze_backbone_stages: no backbone stage found in this model's parameters; "
            "set it to 0"
        )
    return frozen
