"""Frozen batch norm folded into the convolution before it, in training only (issue 32)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from streamseg.models.maskrcnn.backbone import Bottleneck, FrozenBatchNorm2d, ResNet, conv_frozen_bn


def _randomise(model: nn.Module) -> None:
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, FrozenBatchNorm2d):
            c = m.weight.shape[0]
            m.weight.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.copy_(torch.randn(c, generator=g))
            m.running_mean.copy_(torch.randn(c, generator=g))
            m.running_var.copy_(torch.rand(c, generator=g) + 0.1)


def _body() -> ResNet:
    torch.manual_seed(0)
    body = ResNet(Bottleneck, (1, 2, 1, 1), widths=(8, 16, 16, 16), stem_width=8)
    _randomise(body)
    return body


@pytest.mark.parametrize("channels_last", [False, True])
def test_folded_training_forward_and_gradients_match_the_two_steps(channels_last: bool) -> None:
    body = _body()
    x = torch.randn(2, 3, 64, 48)
    if channels_last:
        body.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        x = x.contiguous(memory_format=torch.channels_last)
    body.eval()  # the two steps, as serving runs them
    ref = body(x)
    sum(o.square().mean() for o in ref).backward()
    ref_grads = {n: p.grad.clone() for n, p in body.named_parameters()}
    body.zero_grad()
    body.train()  # folded
    out = body(x)
    sum(o.square().mean() for o in out).backward()
    for a, b in zip(out, ref, strict=True):  # fp32 rounding of a different order of sums
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))
    if channels_last:
        assert out[0].is_contiguous(memory_format=torch.channels_last)
    for name, p in body.named_parameters():
        scale = float(ref_grads[name].abs().max())
        torch.testing.assert_close(p.grad, ref_grads[name], rtol=1e-3, atol=1e-4 * scale, msg=name)


def test_eval_mode_is_the_unfolded_two_steps_bit_for_bit() -> None:
    conv, bn = nn.Conv2d(4, 6, 3, padding=1, bias=False), FrozenBatchNorm2d(6)
    _randomise(bn)
    bn.eval()
    x = torch.randn(1, 4, 9, 9)
    assert torch.equal(conv_frozen_bn(conv, bn, x), bn(conv(x)))


def test_training_runs_one_convolution_per_conv_and_norm() -> None:
    body = _body().train()
    seen: list[str] = []

    class Ops(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Ops():
        body(torch.randn(1, 3, 32, 32))
    convs = sum(isinstance(m, nn.Conv2d) for m in body.modules())
    assert seen.count("conv2d") == convs
    assert "addcmul" not in seen  # no separate pass of the norm over a feature map
