"""``mask2former_small``: Mask2Former on ``maskrcnn_small``'s narrow ResNet-18.

The pixel decoder and the masked-attention decoder are transformers' (at 64
channels); the backbone is streamseg's own ResNet trunk with the exact
structure of ``maskrcnn_small``'s (``SMALL_SPEC``), so it can start from the
backbone of a trained Mask R-CNN checkpoint of ours, as the published
Mask2Former starts from ImageNet weights (see docs/mask2former.md and
``scripts/m2f_init_from_maskrcnn.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from streamseg.models.maskrcnn.backbone import BasicBlock, ResNet
from streamseg.models.maskrcnn.build import SMALL_SPEC

__all__ = ["SMALL_DEFAULTS", "ResNetEncoder", "backbone_from_maskrcnn", "small_encoder"]

# Build options of mask2former_small that differ from Mask2Former's defaults.
SMALL_DEFAULTS: dict[str, Any] = {
    "min_size": 240,
    "max_size": 320,
    "num_queries": 50,
    "num_points": 1024,
}

# Where Mask R-CNN keeps the trunk, and where Mask2Former keeps it.
_MASKRCNN_PREFIX = "backbone.body."
_ENCODER_PREFIX = "model.pixel_level_module.encoder.body."


class ResNetEncoder(nn.Module):
    """A streamseg ResNet in the place of transformers' backbone.

    ``forward(images (B, 3, H, W))`` returns an object with ``feature_maps``:
    the outputs of ``layer1..layer4`` (strides 4, 8, 16, 32), as
    transformers' ``BackboneOutput``; ``channels`` are their widths (what the
    pixel decoder is built for).
    """

    def __init__(self, body: ResNet) -> None:
        super().__init__()
        self.body = body
        self.channels = list(body.out_channels)

    def forward(self, pixel_values: Tensor) -> Any:
        from transformers.modeling_outputs import BackboneOutput

        return BackboneOutput(feature_maps=tuple(self.body(pixel_values)))


def small_encoder() -> ResNetEncoder:
    """``maskrcnn_small``'s trunk (BasicBlock, depths 1-1-2-1, widths 24-48-96-192)."""
    spec = SMALL_SPEC
    body = ResNet(
        BasicBlock,
        spec.depths,
        spec.widths,
        spec.stem_width,
        spec.stem_kernel,
    )
    return ResNetEncoder(body)


def backbone_from_maskrcnn(
    model_state: Mapping[str, Tensor], maskrcnn_state: Mapping[str, Tensor]
) -> tuple[dict[str, Tensor], int]:
    """``model_state`` with its trunk replaced by a Mask R-CNN checkpoint's.

    Args:
        model_state: a ``mask2former_small`` state dict.
        maskrcnn_state: a ``maskrcnn_small`` state dict (``backbone.body.*``).

    Returns:
        the new state dict and how many tensors came from ``maskrcnn_state``.

    Raises:
        ValueError: a trunk tensor is missing or has another shape (not a
            ``maskrcnn_small`` checkpoint).
    """
    state = dict(model_state)
    copied = 0
    for key, value in model_state.items():
        if not key.startswith(_ENCODER_PREFIX):
            continue
        source_key = _MASKRCNN_PREFIX + key[len(_ENCODER_PREFIX) :]
        source = maskrcnn_state.get(source_key)
        if source is None or tuple(source.shape) != tuple(value.shape):
            found = "missing" if source is None else f"shape {tuple(source.shape)}"
            raise ValueError(
                f"{source_key}: {found}, expected {tuple(value.shape)}; the backbone must "
                "come from a maskrcnn_small checkpoint"
            )
        state[key] = source.clone()
        copied += 1
    return state, copied
