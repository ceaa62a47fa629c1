"""RoI box and mask heads with torchvision's parameter names.

* ``TwoMLPHead`` (v1): ``fc6``, ``fc7``.
* ``ConvFCHead`` (v2): a ``Sequential`` of 4 conv+BN+ReLU blocks (``0``-``3``),
  a flatten (``4``) and one linear layer (``5``) + ReLU.
* ``MaskHead``: a ``Sequential`` of 3x3 conv [+BN] + ReLU blocks (``0.0``,
  ``1.0``, ...); ``MaskPredictor``: ``conv5_mask`` (2x deconv) and
  ``mask_fcn_logits`` (one channel per class).
"""

from __future__ import annotations

from torch import Tensor, nn

from streamseg.models.maskrcnn.fpn import conv_norm_act

__all__ = ["BoxPredictor", "ConvFCHead", "MaskHead", "MaskPredictor", "TwoMLPHead"]


class TwoMLPHead(nn.Module):
    """Flatten the pooled ``(K, C, 7, 7)`` features, two fully connected layers + ReLU."""

    def __init__(self, in_features: int, hidden: int) -> None:
        super().__init__()
        self.fc6 = nn.Linear(in_features, hidden)
        self.fc7 = nn.Linear(hidden, hidden)
        self.relu = nn.ReLU(inplace=True)
        self.out_features = hidden

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.fc7(self.relu(self.fc6(x.flatten(1)))))


class ConvFCHead(nn.Sequential):
    """``convs`` x (3x3 conv, BatchNorm, ReLU), flatten, linear + ReLU (the v2 box head)."""

    def __init__(self, channels: int, resolution: int, convs: int, hidden: int) -> None:
        blocks: list[nn.Module] = [
            conv_norm_act(channels, channels, 3, norm=True) for _ in range(convs)
        ]
        blocks += [
            nn.Flatten(),
            nn.Linear(channels * resolution * resolution, hidden),
            nn.ReLU(inplace=True),
        ]
        super().__init__(*blocks)
        self.out_features = hidden
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


class BoxPredictor(nn.Module):
    """Class logits ``(K, num_classes)`` and per-class box deltas ``(K, 4 * num_classes)``."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.cls_score = nn.Linear(in_features, num_classes)
        self.bbox_pred = nn.Linear(in_features, num_classes * 4)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = x.flatten(1)
        return self.cls_score(x), self.bbox_pred(x)


class MaskHead(nn.Sequential):
    """``layers`` x (3x3 conv [+ BatchNorm] + ReLU) on the pooled ``(K, C, 14, 14)``."""

    def __init__(self, in_channels: int, channels: int, layers: int, *, norm: bool) -> None:
        blocks = []
        c = in_channels
        for _ in range(layers):
            blocks.append(conv_norm_act(c, channels, 3, norm=norm))
            c = channels
        super().__init__(*blocks)
        self.out_channels = channels
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)


class MaskPredictor(nn.Module):
    """2x transposed conv + ReLU, then a 1x1 conv to one mask logit map per class."""

    def __init__(self, in_channels: int, hidden: int, num_classes: int) -> None:
        super().__init__()
        self.conv5_mask = nn.ConvTranspose2d(in_channels, hidden, 2, 2)
        self.relu = nn.ReLU(inplace=True)
        self.mask_fcn_logits = nn.Conv2d(hidden, num_classes, 1)
        for m in (self.conv5_mask, self.mask_fcn_logits):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.mask_fcn_logits(self.relu(self.conv5_mask(x)))
