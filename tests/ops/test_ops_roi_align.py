"""RoIAlign and multi-scale RoIAlign against torchvision's rules in plain loops."""

from __future__ import annotations

import pytest
import torch

from streamseg import ops
from tests.ops import brute

H, W = 9, 11
ROI_CASES = {
    "one": [[0, 1.0, 1.0, 6.0, 5.0]],
    "border": [[0, 0.0, 0.0, 22.0, 18.0], [1, 20.0, 16.0, 22.0, 18.0], [0, -2.0, -2.0, 1.0, 1.0]],
    "out_of_frame": [[0, 40.0, 40.0, 60.0, 50.0], [1, -30.0, -30.0, -4.0, -6.0]],
    "degenerate": [[0, 4.0, 4.0, 4.0, 4.0], [1, 8.0, 6.0, 2.0, 3.0]],
    "large": [[0, 0.5, 1.5, 21.0, 17.5], [1, 3.0, 2.0, 13.0, 9.0]],
}


def make_input(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(2, 3, H, W, dtype=dtype)


@pytest.mark.parametrize("case", ROI_CASES)
@pytest.mark.parametrize("sampling_ratio", [0, 2, -1])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_matches_brute(case: str, sampling_ratio: int, aligned: bool) -> None:
    x = make_input()
    rois = torch.tensor(ROI_CASES[case], dtype=torch.float64)
    got = ops.roi_align(x, rois, (3, 4), 0.5, sampling_ratio, aligned)
    want = brute.roi_align(x, rois, (3, 4), 0.5, sampling_ratio, aligned)
    torch.testing.assert_close(got, want)


def test_roi_align_float32_and_empty() -> None:
    x = make_input(torch.float32)
    rois = torch.tensor(ROI_CASES["large"], dtype=torch.float32)
    got = ops.roi_align(x, rois, (2, 2), 0.5, 0, True)
    assert got.dtype == torch.float32
    want = brute.roi_align(x, rois, (2, 2), 0.5, 0, True)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    empty = ops.roi_align(x, torch.zeros(0, 5), (7, 7), 0.25, 2, False)
    assert empty.shape == (0, 3, 7, 7)


def test_roi_align_adaptive_grid_varies_per_roi() -> None:
    x = make_input()
    rois = torch.tensor([[0, 0.0, 0.0, 2.0, 2.0], [1, 0.0, 0.0, 20.0, 17.0]], dtype=torch.float64)
    got = ops.roi_align(x, rois, (2, 2), 1.0, 0, False)
    torch.testing.assert_close(got, brute.roi_align(x, rois, (2, 2), 1.0, 0, False))


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_gradcheck(aligned: bool, sampling_ratio: int) -> None:
    x = torch.randn(2, 2, 6, 7, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(
        [[0, 0.0, 0.0, 5.0, 4.0], [1, 1.5, 0.5, 12.0, 11.0], [0, -1.0, 2.0, 3.0, 3.5]],
        dtype=torch.float64,
    )
    assert torch.autograd.gradcheck(
        lambda t: ops.roi_align(t, rois, (2, 3), 0.5, sampling_ratio, aligned), (x,)
    )


def fpn(batch: int = 2, channels: int = 2, img: tuple[int, int] = (64, 96)) -> list[torch.Tensor]:
    return [
        torch.randn(batch, channels, img[0] // s, img[1] // s, dtype=torch.float64)
        for s in (4, 8, 16, 32)
    ]


def test_multiscale_levels_and_values() -> None:
    feats = fpn()
    boxes = [
        torch.tensor([[0.0, 0, 10, 10], [5, 5, 60, 50], [0, 0, 0, 0]], dtype=torch.float64),
        torch.tensor([[0.0, 0, 96, 64], [30, 20, 50, 40], [8, 8, 2, 12]], dtype=torch.float64),
    ]
    sizes = [(60, 90), (64, 96)]
    # canonical 16 px at level 3 so these small images reach every level.
    got = ops.multiscale_roi_align(feats, boxes, sizes, 3, 2, canonical_scale=16, canonical_level=3)
    assert got.shape == (6, 2, 3, 3)
    scales = [1 / 4, 1 / 8, 1 / 16, 1 / 32]
    rows = [(i, b) for i, bs in enumerate(boxes) for b in bs.tolist()]
    levels = [brute.level_of(b, 2, 5, s0=16, l0=3) for _, b in rows]
    assert levels == [0, 2, 0, 3, 1, -1]
    for r, ((img, box), lvl) in enumerate(zip(rows, levels, strict=True)):
        if lvl < 0:
            assert torch.all(got[r] == 0)
            continue
        roi = torch.tensor([[img, *box]], dtype=torch.float64)
        want = brute.roi_align(feats[lvl], roi, (3, 3), scales[lvl], 2, False)
        torch.testing.assert_close(got[r : r + 1], want)


def test_multiscale_default_canonical_and_single_level() -> None:
    feats = fpn(batch=1, img=(256, 256))
    boxes = [torch.tensor([[0.0, 0, 250, 250], [0, 0, 20, 20]], dtype=torch.float64)]
    got = ops.multiscale_roi_align(feats, boxes, [(256, 256)], 2, 2)
    # sqrt(area) 250 -> level 4 (index 2); 20 -> below 2, clamped to index 0.
    torch.testing.assert_close(
        got[0:1],
        brute.roi_align(feats[2], torch.tensor([[0.0, 0, 0, 250, 250]]), (2, 2), 1 / 16, 2, False),
    )
    torch.testing.assert_close(
        got[1:2],
        brute.roi_align(feats[0], torch.tensor([[0.0, 0, 0, 20, 20]]), (2, 2), 1 / 4, 2, False),
    )
    one = ops.multiscale_roi_align(feats[:1], boxes, [(256, 256)], 2, 2)
    rois = torch.tensor([[0.0, 0, 0, 250, 250], [0, 0, 0, 20, 20]])
    torch.testing.assert_close(one, brute.roi_align(feats[0], rois, (2, 2), 1 / 4, 2, False))


def test_multiscale_scale_inference_rounds_like_torchvision() -> None:
    # 800x1333 image padded to 800x1344: P2 is 200x336 -> 1/4, P5 25x42 -> 1/32.
    from streamseg.ops.reference import infer_scales

    feats = [torch.zeros(1, 1, 800 // s, 1344 // s) for s in (4, 8, 16, 32)]
    assert infer_scales(feats, [(800, 1333)]) == [0.25, 0.125, 0.0625, 0.03125]
    assert infer_scales([torch.zeros(1, 1, 25, 25)], [(199, 199)]) == [0.125]


def test_multiscale_gradient_flows() -> None:
    feats = [f.requires_grad_() for f in fpn()]
    boxes = [torch.tensor([[0.0, 0, 10, 10], [5, 5, 60, 50]], dtype=torch.float64)]
    out = ops.multiscale_roi_align(
        feats, boxes, [(64, 96)], 2, 2, canonical_scale=16, canonical_level=3
    )
    out.sum().backward()
    assert feats[0].grad is not None and feats[0].grad.abs().sum() > 0
    assert feats[2].grad is not None and feats[2].grad.abs().sum() > 0
    assert feats[1].grad is None or feats[1].grad.abs().sum() == 0
