"""Preprocessing: resize, normalise and pad frames of several sizes into one batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from streamseg.models import InputSpec
from streamseg.segment.preprocess import padded_size, preprocess, resized_size

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TV = InputSpec()  # torchvision: RGB, /255, ImageNet mean/std, 800/1333, /32
CAFFE = InputSpec(
    channel_order="BGR",
    scale=1.0,
    mean=(103.53, 116.28, 123.675),
    std=(1.0, 1.0, 1.0),
    min_size=64,
    max_size=100,
    size_divisibility=16,
)


def _torch_scale(h: int, w: int, min_size: int, max_size: int) -> float:
    """The scale torchvision's transform computes (float32 tensors)."""
    size = torch.tensor([h, w], dtype=torch.float32)
    return float(torch.min(min_size / size.min(), max_size / size.max()))


@pytest.mark.parametrize(
    ("h", "w", "min_size", "max_size"),
    [
        (480, 640, 800, 1333),
        (360, 640, 800, 1333),
        (100, 1000, 800, 1333),  # capped by max_size
        (1080, 1920, 360, 640),  # shrinking
        (360, 640, 360, 640),  # unchanged
        (37, 53, 64, 100),
        (333, 777, 555, 999),
        (719, 1279, 800, 1333),
    ],
)
def test_resized_size_is_what_interpolate_with_the_scale_gives(
    h: int, w: int, min_size: int, max_size: int
) -> None:
    scale = _torch_scale(h, w, min_size, max_size)
    x = torch.zeros((1, 3, h, w))
    expected = F.interpolate(
        x, scale_factor=scale, mode="bilinear", recompute_scale_factor=True, align_corners=False
    ).shape[-2:]
    assert resized_size(h, w, min_size, max_size) == tuple(expected)


def test_resized_size_caps_the_longer_side() -> None:
    assert resized_size(100, 1000, 800, 1333) == (133, 1333)
    assert resized_size(480, 640, 800, 1333) == (800, 1066)


def test_padded_size_rounds_up_to_divisibility() -> None:
    assert padded_size([(799, 1066)], 32) == (800, 1088)
    assert padded_size([(100, 50), (60, 130)], 32) == (128, 160)
    assert padded_size([(33, 17)], 1) == (33, 17)


def _reference(image: torch.Tensor, spec: InputSpec) -> torch.Tensor:
    """torchvision's order: normalise the float image, then resize it."""
    x = image.permute(2, 0, 1).float()
    if spec.channel_order == "BGR":
        x = x.flip(0)
    x = x / spec.scale
    mean = torch.tensor(spec.mean).view(3, 1, 1)
    std = torch.tensor(spec.std).view(3, 1, 1)
    x = (x - mean) / std
    h, w = resized_size(image.shape[0], image.shape[1], spec.min_size, spec.max_size)
    return F.interpolate(x[None], size=(h, w), mode="bilinear", align_corners=False)[0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("spec", [TV, CAFFE], ids=["torchvision", "caffe-bgr"])
def test_batch_of_several_cameras_matches_per_frame_reference(device: str, spec: InputSpec) -> None:
    small = InputSpec(**{**spec.__dict__, "min_size": 64, "max_size": 100})
    frames = [
        torch.randint(0, 256, (48, 64, 3), dtype=torch.uint8),
        torch.randint(0, 256, (30, 90, 3), dtype=torch.uint8),
        torch.randint(0, 256, (48, 64, 3), dtype=torch.uint8),  # same camera size again
    ]
    out = preprocess([f.to(device) for f in frames], small, device=device)
    assert out.frame_sizes == [(48, 64), (30, 90), (48, 64)]
    assert out.image_sizes == [(64, 85), (33, 100), (64, 85)]
    d = small.size_divisibility
    n, _, ph, pw = out.images.shape
    assert n == 3 and ph % d == 0 and pw % d == 0
    assert out.images.device.type == device
    for i, frame in enumerate(frames):
        h, w = out.image_sizes[i]
        expected = _reference(frame, small)
        torch.testing.assert_close(out.images[i, :, :h, :w].cpu(), expected, atol=2e-4, rtol=1e-5)
        assert out.images[i, :, h:, :].abs().sum() == 0  # zero after normalisation
        assert out.images[i, :, :, w:].abs().sum() == 0


def test_channel_order_and_normalisation_of_a_flat_colour() -> None:
    frame = torch.empty((64, 64, 3), dtype=torch.uint8)
    frame[..., 0], frame[..., 1], frame[..., 2] = 200, 100, 10  # R, G, B
    out = preprocess([frame], CAFFE)
    # BGR, no scaling, caffe means: channel 0 is blue.
    expected = torch.tensor([10 - 103.53, 100 - 116.28, 200 - 123.675])
    torch.testing.assert_close(out.images[0, :, 10, 10], expected)
    rgb = preprocess([frame], InputSpec(min_size=64, max_size=64))
    expected_rgb = (torch.tensor([200, 100, 10]) / 255 - torch.tensor(TV.mean)) / torch.tensor(
        TV.std
    )
    torch.testing.assert_close(rgb.images[0, :, 10, 10], expected_rgb)


def test_fixed_input_size_and_batch_padding() -> None:
    spec = InputSpec(min_size=64, max_size=100, size_divisibility=32)
    frames = [torch.full((48, 64, 3), 128, dtype=torch.uint8)]
    out = preprocess(frames, spec, pad_to=(96, 128), batch_to=3, channels_last=True)
    assert out.images.shape == (3, 3, 96, 128)
    assert out.images.is_contiguous(memory_format=torch.channels_last)
    assert out.image_sizes == [(64, 85)] and out.frame_sizes == [(48, 64)]
    assert out.images[1:].abs().sum() == 0


def test_frames_too_large_for_a_fixed_size_are_an_error() -> None:
    spec = InputSpec(min_size=64, max_size=100, size_divisibility=32)
    with pytest.raises(ValueError, match=r"larger than the fixed input size 64x64"):
        preprocess([torch.zeros((48, 64, 3), dtype=torch.uint8)], spec, pad_to=(64, 64))


def test_empty_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one image"):
        preprocess([], TV)
