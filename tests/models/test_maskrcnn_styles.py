"""The detectron2 style's parts against hand-written references (tiny tensors)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from streamseg import ops
from streamseg.models import build_model
from streamseg.models.maskrcnn.backbone import Bottleneck, FrozenBatchNorm2d
from streamseg.models.maskrcnn.roi_heads import RoIHeads, RoISettings
from streamseg.models.maskrcnn.rpn import AnchorGenerator
from tests.ops import brute


def _randomise(block: torch.nn.Module) -> None:
    torch.manual_seed(0)
    for m in block.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.weight.data.normal_(0, 0.3)
        if isinstance(m, FrozenBatchNorm2d):
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0, 0.1)
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)


def _bn(x: torch.Tensor, bn: FrozenBatchNorm2d) -> torch.Tensor:
    shape = (1, -1, 1, 1)
    std = torch.sqrt(bn.running_var + bn.eps).view(shape)
    return (x - bn.running_mean.view(shape)) / std * bn.weight.view(shape) + bn.bias.view(shape)


def _reference_bottleneck(
    x: torch.Tensor, b: Bottleneck, stride: int, stride_in_1x1: bool
) -> torch.Tensor:
    """The block written out: where the stride goes is the only difference."""
    s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
    y = F.relu(_bn(F.conv2d(x, b.conv1.weight, stride=s1), b.bn1))
    y = F.relu(_bn(F.conv2d(y, b.conv2.weight, stride=s3, padding=1), b.bn2))
    y = _bn(F.conv2d(y, b.conv3.weight), b.bn3)
    assert b.downsample is not None
    shortcut = _bn(F.conv2d(x, b.downsample[0].weight, stride=stride), b.downsample[1])
    return F.relu(y + shortcut)


@pytest.mark.parametrize("stride_in_1x1", [False, True])
def test_bottleneck_puts_the_stride_where_asked(stride_in_1x1: bool) -> None:
    block = Bottleneck(8, 4, 2, stride_in_1x1=stride_in_1x1)
    _randomise(block)
    x = torch.randn(1, 8, 9, 7)
    with torch.no_grad():
        got = block(x)
        want = _reference_bottleneck(x, block, 2, stride_in_1x1)
        other = _reference_bottleneck(x, block, 2, not stride_in_1x1)
    assert got.shape == (1, 16, 5, 4)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, other, atol=1e-3)  # the two placements really differ


@pytest.mark.parametrize(("aligned", "want"), [(False, 4.0), (True, 3.5)])
def test_roi_align_aligned_samples_pixel_centres(aligned: bool, want: float) -> None:
    # Feature value = column index. Pixel i covers [i, i + 1) in image coordinates,
    # so the box x in [2, 6] has its centre on column 3.5 once the half-pixel
    # shift (aligned=True) is made, and on "column 4" without it.
    ramp = torch.arange(10, dtype=torch.float64).expand(1, 1, 10, 10).contiguous()
    box = torch.tensor([[0, 2.0, 2.0, 6.0, 6.0]], dtype=torch.float64)
    pooled = ops.roi_align(ramp, box, (1, 1), 1.0, 0, aligned)
    assert float(pooled) == pytest.approx(want)


@pytest.mark.parametrize(
    ("style", "aligned", "ratio"), [("torchvision", False, 2), ("detectron2", True, 0)]
)
def test_roi_heads_pool_with_the_style_s_roi_align(style: str, aligned: bool, ratio: int) -> None:
    model = build_model("maskrcnn_small", style=style)
    settings: RoISettings = model.roi_heads.settings
    assert (settings.aligned, settings.sampling_ratio) == (aligned, ratio)
    heads = RoIHeads(
        torch.nn.Identity(), torch.nn.Identity(), torch.nn.Identity(), torch.nn.Identity(), settings
    )
    torch.manual_seed(1)
    size = (256, 256)
    feats = [torch.randn(1, 2, 256 // s, 256 // s, dtype=torch.float64) for s in (8, 16, 32)]
    boxes = torch.tensor(
        [[3.0, 5.0, 20.0, 17.0], [10.0, 10.0, 240.5, 238.0], [-20.0, 0.0, 480.0, 460.0]],
        dtype=torch.float64,
    )
    got = heads._pool(feats, [boxes], [size], 2)
    levels = []
    for i, box in enumerate(boxes.tolist()):
        level = brute.level_of(box, 3, 5)
        roi = torch.tensor([[0.0, *box]], dtype=torch.float64)
        want = brute.roi_align(feats[level], roi, (2, 2), 1 / 2 ** (level + 3), ratio, aligned)
        torch.testing.assert_close(got[i : i + 1], want, msg=f"box {i} level {level}")
        levels.append(level)
    assert levels == [0, 1, 2]


def test_detectron2_anchors_are_exact_and_on_fixed_strides() -> None:
    exact = AnchorGenerator((32,), rounded=False, strides=(4,))
    s = 32 / math.sqrt(2)  # half the long side of a ratio-0.5 anchor of area 32**2
    want = torch.tensor([[-s, -s / 2, s, s / 2], [-16, -16, 16, 16], [-s / 2, -s, s / 2, s]])
    torch.testing.assert_close(exact.base_anchors(32), want)
    rounded = AnchorGenerator((32,)).base_anchors(32)
    assert torch.equal(
        rounded, torch.tensor([[-23.0, -11, 23, 11], [-16, -16, 16, 16], [-11, -23, 11, 23]])
    )
    # A 96x96 padded image: P5 is 3x3, the pooled level P6 2x2. Its second column
    # is 64 pixels to the right in detectron2, 96 // 2 = 48 in torchvision.
    d2 = build_model("maskrcnn_small", style="detectron2").rpn.anchor_generator
    tv = build_model("maskrcnn_small").rpn.anchor_generator
    assert d2.strides == (8, 16, 32, 64) and tv.strides is None
    grids = [(12, 12), (6, 6), (3, 3), (2, 2)]
    p6 = -2 * 2 * 3  # the last 2x2x3 anchors
    for gen, step in ((d2, 64.0), (tv, 48.0)):
        anchors = gen((96, 96), grids, torch.device("cpu"))[p6:]
        assert float(anchors[3, 0] - anchors[0, 0]) == pytest.approx(step)


def test_style_option_is_checked_and_kept() -> None:
    with pytest.raises(ValueError, match="style must be one of torchvision, detectron2"):
        build_model("maskrcnn_small", style="caffe")
    model = build_model("maskrcnn_small", style="detectron2")
    assert model.style == "detectron2" and model.input_spec.channel_order == "BGR"
    assert build_model("maskrcnn_small").style == "torchvision"
