"""ResNet bodies with frozen batch norm, in torchvision's state-dict layout.

Parameter names follow torchvision's ``resnet`` (``conv1``, ``bn1``,
``layer1.0.conv1``, ``layer1.0.downsample.0``, ...), so a torchvision
checkpoint's ``backbone.body.*`` entries load as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["BasicBlock", "Bottleneck", "FrozenBatchNorm2d", "ResNet", "conv_frozen_bn"]


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed statistics and affine parameters (all buffers).

    ``y = (x - running_mean) / sqrt(running_var + eps) * weight + bias``.
    Nothing here is trained, as in detection backbones fine-tuned with small
    batches.
    """

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight: Tensor
        self.bias: Tensor
        self.running_mean: Tensor
        self.running_var: Tensor
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints saved from a plain BatchNorm2d carry a step counter we do not keep.
        state_dict.pop(prefix + "num_batches_tracked", None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def scale_shift(self) -> tuple[Tensor, Tensor]:
        """Per-channel ``(scale, shift)`` with ``y = x * scale + shift``."""
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        return scale, self.bias - self.running_mean * scale

    def forward(self, x: Tensor) -> Tensor:
        scale, shift = self.scale_shift()
        return torch.addcmul(shift.view(1, -1, 1, 1), x, scale.view(1, -1, 1, 1).to(x.dtype))

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def conv_frozen_bn(conv: nn.Conv2d, bn: FrozenBatchNorm2d, x: Tensor) -> Tensor:
    """``bn(conv(x))``; in training, one convolution with the frozen norm folded in.

    A frozen norm is a per-channel constant ``(scale, shift)``, so
    ``conv(x, W) * scale + shift == conv(x, W * scale) + shift``: training
    convolves with ``W * scale`` (a weight-sized product, through which the
    gradient of ``W`` flows) and ``shift`` as the bias, sparing the pass over
    the feature map forward and backward. In eval mode (serving, evaluation)
    the two steps stay as they are, so inference is bit for bit unchanged.
    """
    if not bn.training:
        return bn(conv(x))
    scale, shift = bn.scale_shift()
    padding: Any = conv.padding
    args = (conv.stride, padding, conv.dilation, conv.groups)
    if torch.is_autocast_enabled(x.device.type) or isinstance(padding, str):
        weight = conv.weight * scale.view(-1, 1, 1, 1).to(conv.weight.dtype)
        return F.conv2d(x, weight, shift, *args)
    out: Tensor = _FoldedConv.apply(x, conv.weight, scale, shift, args)
    return out


class _FoldedConv(torch.autograd.Function):
    """``conv2d(x, weight * scale, shift)`` that keeps ``weight``, not the product, for
    the backward pass (a copy of the weights fewer held per step; the product is
    made again there)."""

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, weight: Tensor, scale: Tensor, shift: Tensor, args: tuple
    ) -> Tensor:
        ctx.save_for_backward(x, weight, scale)
        ctx.args = args
        return F.conv2d(x, weight * scale.view(-1, 1, 1, 1), shift, *args)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight, scale = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.args
        s = scale.view(-1, 1, 1, 1)
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], False]
        gx, gw, _ = torch.ops.aten.convolution_backward(
            grad, x, weight * s, None, stride, padding, dilation, False, [0, 0], groups, mask
        )
        return gx, (gw * s if gw is not None else None), None, None, None


def _conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)


class _Downsample(nn.Sequential):
    """The shortcut's 1x1 conv (``.0``) and frozen norm (``.1``), folded in training."""

    def forward(self, x: Tensor) -> Tensor:
        conv, bn = self
        assert isinstance(conv, nn.Conv2d) and isinstance(bn, FrozenBatchNorm2d)
        return conv_frozen_bn(conv, bn, x)


def _downsample(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return _Downsample(_conv(cin, cout, 1, stride), FrozenBatchNorm2d(cout))


class BasicBlock(nn.Module):
    """Two 3x3 convs (ResNet-18/34 block); ``expansion = 1``.

    ``stride_in_1x1`` is accepted for a uniform signature and ignored: this
    block has no 1x1 conv, its first 3x3 conv strides in both styles.
    """

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int, *, stride_in_1x1: bool = False) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv(cin, width, 3, stride)
        self.bn1 = FrozenBatchNorm2d(width)
        self.conv2 = _conv(width, cout, 3)
        self.bn2 = FrozenBatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(cin, cout, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(conv_frozen_bn(self.conv1, self.bn1, x))
        out = conv_frozen_bn(self.conv2, self.bn2, out)
        out += identity  # in place: a fresh tensor no backward pass reads
        return self.relu(out)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 block; ``expansion = 4``.

    The block's stride sits in the 3x3 conv (torchvision's "ResNet v1.5"), or
    with ``stride_in_1x1`` in the first 1x1 conv (the original MSRA ResNet
    that detectron2's ImageNet weights come from). Same parameters, different
    function: weights trained one way are wrong the other way.
    """

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int, *, stride_in_1x1: bool = False) -> None:
        super().__init__()
        cout = width * self.expansion
        stride_1x1, stride_3x3 = (stride, 1) if stride_in_1x1 else (1, stride)
        self.conv1 = _conv(cin, width, 1, stride_1x1)
        self.bn1 = FrozenBatchNorm2d(width)
        self.conv2 = _conv(width, width, 3, stride_3x3)
        self.bn2 = FrozenBatchNorm2d(width)
        self.conv3 = _conv(width, cout, 1)
        self.bn3 = FrozenBatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(cin, cout, stride)

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(conv_frozen_bn(self.conv1, self.bn1, x))
        out = self.relu(conv_frozen_bn(self.conv2, self.bn2, out))
        out = conv_frozen_bn(self.conv3, self.bn3, out)
        out += identity  # in place: a fresh tensor no backward pass reads
        return self.relu(out)


class ResNet(nn.Module):
    """ResNet trunk returning the outputs of ``layer1..layer4`` (strides 4..32).

    Args:
        block: :class:`Bottleneck` (ResNet-50) or :class:`BasicBlock` (ResNet-18).
        depths: blocks per stage, e.g. ``(3, 4, 6, 3)`` for ResNet-50.
        widths: inner width per stage, e.g. ``(64, 128, 256, 512)``.
        stem_width: channels of the stem conv.
        stem_kernel: its kernel size (7 in ResNets; smaller is cheaper).
        stride_in_1x1: bottlenecks stride in their first 1x1 conv (detectron2's
            MSRA weights) instead of their 3x3 conv (torchvision).
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        depths: Sequence[int],
        widths: Sequence[int] = (64, 128, 256, 512),
        stem_width: int = 64,
        stem_kernel: int = 7,
        *,
        stride_in_1x1: bool = False,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(
            3, stem_width, stem_kernel, stride=2, padding=stem_kernel // 2, bias=False
        )
        self.bn1 = FrozenBatchNorm2d(stem_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        cin = stem_width
        self.out_channels: list[int] = []
        for i, (depth, width) in enumerate(zip(depths, widths, strict=True)):
            blocks = []
            for j in range(depth):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(cin, width, stride, stride_in_1x1=stride_in_1x1))
                cin = width * block.expansion
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
            self.out_channels.append(cin)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor) -> list[Tensor]:
        x = self.maxpool(self.relu(conv_frozen_bn(self.conv1, self.bn1, x)))
        outs = []
        for i in range(len(self.out_channels)):
            x = getattr(self, f"layer{i + 1}")(x)
            outs.append(x)
        return outs

    def freeze_stages(self, stages: int) -> None:
        """Stop gradients of the stem (stage 0) and ``layer1..layer{stages-1}``."""
        if stages <= 0:
            return
        frozen: list[nn.Module] = [self.conv1]
        frozen += [getattr(self, f"layer{k}") for k in range(1, min(stages, 5))]
        for module in frozen:
            for p in module.parameters():
                p.requires_grad_(False)
