"""Models: Mask R-CNN and Mask2Former in plain PyTorch, and checkpoint loading.

``build_model(arch, **options)`` is the one entry point. The table below maps
each architecture name (the ``model.arch`` field of ``pipeline.yaml``) to the
function that builds it; modules are imported only when their model is built.

Every model follows one contract (see ``docs/architecture.md``):

* ``model.input_spec``: an :class:`InputSpec` (colour order, value scale,
  mean/std, min/max size, size divisibility) that the Segmenter's
  preprocessing follows;
* ``model(images, image_sizes)`` in eval mode: ``images`` is ``float32
  (B, 3, H, W)`` normalised and padded, ``image_sizes`` the unpadded
  ``(h, w)`` of each; returns raw per-image outputs;
* ``model.postprocess(outputs, image_sizes, frame_sizes)`` -> list of
  :class:`streamseg.types.Instances` at frame resolution;
* ``model(images, image_sizes, targets)`` in train mode -> dict of scalar
  losses.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from torch import nn

__all__ = ["ARCHITECTURES", "InputSpec", "build_model"]


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """How a model wants its input images.

    Attributes:
        channel_order: ``"RGB"`` (torchvision, transformers) or ``"BGR"``
            (detectron2's caffe-style weights).
        scale: images are divided by this before normalising (255.0 for
            inputs in ``[0, 1]`` like torchvision, 1.0 for ``[0, 255]``).
        mean / std: per-channel, applied after scaling, in ``channel_order``.
        min_size / max_size: shorter side resized to ``min_size`` unless the
            longer side would pass ``max_size``.
        size_divisibility: padded height and width are multiples of this.
    """

    channel_order: str = "RGB"
    scale: float = 255.0
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    min_size: int = 800
    max_size: int = 1333
    size_divisibility: int = 32


# arch name -> "module:function". The function takes keyword options
# (num_classes, thresholds, ...) and returns an nn.Module following the contract.
ARCHITECTURES: dict[str, str] = {
    "maskrcnn_r50_fpn": "streamseg.models.maskrcnn.build:maskrcnn_r50_fpn",
    "maskrcnn_r50_fpn_v2": "streamseg.models.maskrcnn.build:maskrcnn_r50_fpn_v2",
    "maskrcnn_small": "streamseg.models.maskrcnn.build:maskrcnn_small",
    "mask2former_r50": "streamseg.models.mask2former.build:mask2former_r50",
    "mask2former_swin_t": "streamseg.models.mask2former.build:mask2former_swin_t",
    # A few-channel Mask2Former for tests and smoke runs of every command
    # (serve, bench, train, export); like maskrcnn_small it runs in seconds
    # on a CPU, but unlike it, it is not meant for real use.
    "mask2former_tiny": "streamseg.models.mask2former.build:mask2former_tiny",
}


def build_model(arch: str, **options: Any) -> nn.Module:
    """Build the model named ``arch`` (untrained unless ``weights=`` is given)."""
    if arch not in ARCHITECTURES:
        known = ", ".join(sorted(ARCHITECTURES))
        raise ValueError(f"unknown model arch {arch!r}; choose one of: {known}")
    module_name, func_name = ARCHITECTURES[arch].split(":")
    builder = getattr(importlib.import_module(module_name), func_name)
    model: nn.Module = builder(**options)
    return model
