"""Feature pyramid network on top of a ResNet body (torchvision key layout).

``backbone.fpn.inner_blocks.{i}.0`` are the 1x1 lateral convs and
``backbone.fpn.layer_blocks.{i}.0`` the 3x3 output convs; with ``norm=True``
(the v2 model) each conv has no bias and is followed by a ``BatchNorm2d`` at
``.1``. A max-pool of the coarsest output adds the ``pool`` level (P6).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from streamseg.models.maskrcnn.backbone import ResNet

__all__ = ["FPN", "BackboneWithFPN", "conv_norm_act"]


def conv_norm_act(
    cin: int, cout: int, k: int, *, norm: bool, act: bool = True, stride: int = 1
) -> nn.Sequential:
    """Conv (bias only without norm) [+ BatchNorm2d] [+ ReLU], as ``Conv2dNormActivation``."""
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=not norm)
    ]
    if norm:
        layers.append(nn.BatchNorm2d(cout))
    if act:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class FPN(nn.Module):
    """Top-down pyramid: lateral 1x1 convs, nearest upsampling, 3x3 output convs.

    Args:
        in_channels: channels of each input level, finest first.
        out_channels: channels of every output level.
        norm: batch norm after each conv (v2) instead of conv biases.
    """

    def __init__(self, in_channels: Sequence[int], out_channels: int, *, norm: bool) -> None:
        super().__init__()
        self.inner_blocks = nn.ModuleList(
            conv_norm_act(c, out_channels, 1, norm=norm, act=False) for c in in_channels
        )
        self.layer_blocks = nn.ModuleList(
            conv_norm_act(out_channels, out_channels, 3, norm=norm, act=False) for _ in in_channels
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def forward(self, feats: Sequence[Tensor]) -> list[Tensor]:
        """``feats`` finest first -> outputs finest first, plus the max-pooled coarsest."""
        last = self.inner_blocks[-1](feats[-1])
        outs = [self.layer_blocks[-1](last)]
        for idx in range(len(feats) - 2, -1, -1):
            lateral = self.inner_blocks[idx](feats[idx])
            last = lateral + F.interpolate(last, size=lateral.shape[-2:], mode="nearest")
            outs.insert(0, self.layer_blocks[idx](last))
        outs.append(F.max_pool2d(outs[-1], kernel_size=1, stride=2, padding=0))
        return outs


class BackboneWithFPN(nn.Module):
    """``body`` (a :class:`ResNet`) + ``fpn``: image -> pyramid levels + ``pool``.

    ``stages`` picks the body stages (1 = ``layer1``, stride 4) that feed the
    FPN: ``(1, 2, 3, 4)`` gives P2..P5 and P6 (torchvision); ``(2, 3, 4)``
    gives P3..P5 and P6 (cheaper, for larger objects).
    """

    def __init__(
        self, body: ResNet, out_channels: int, *, norm: bool, stages: Sequence[int] = (1, 2, 3, 4)
    ) -> None:
        super().__init__()
        self.body = body
        self.stages = tuple(stages)
        self.fpn = FPN([body.out_channels[s - 1] for s in self.stages], out_channels, norm=norm)
        self.out_channels = out_channels

    def forward(self, images: Tensor) -> list[Tensor]:
        feats = self.body(images)
        return self.fpn([feats[s - 1] for s in self.stages])
