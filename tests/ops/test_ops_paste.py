"""Mask paste against torchvision's paste_masks_in_image rules in plain loops."""

from __future__ import annotations

import pytest
import torch

from streamseg import ops
from tests.ops import brute

FRAME = (23, 31)
BOX_CASES = {
    "empty": [],
    "one": [[3.2, 4.7, 15.1, 12.9]],
    "border": [[0.0, 0.0, 31.0, 23.0], [-3.0, -2.5, 5.0, 4.0], [25.5, 18.0, 34.0, 26.0]],
    "out_of_frame": [[40.0, 30.0, 60.0, 50.0], [-20.0, -20.0, -10.0, -12.0]],
    "degenerate": [[5.0, 5.0, 5.0, 5.0], [9.0, 9.0, 4.0, 14.0], [10.0, 2.0, 10.4, 20.0]],
    "large": [[-100.0, -80.0, 200.0, 150.0]],
}


@pytest.mark.parametrize("case", BOX_CASES)
@pytest.mark.parametrize("padding", [1, 0, 2])
def test_paste_matches_brute(case: str, padding: int) -> None:
    boxes = torch.tensor(BOX_CASES[case], dtype=torch.float64).reshape(-1, 4)
    masks = torch.rand(len(boxes), 6, 6, dtype=torch.float64)
    got = ops.paste_masks(masks, boxes, FRAME, padding)
    assert got.shape == (len(boxes), *FRAME) and got.dtype == torch.float64
    torch.testing.assert_close(got, brute.paste_masks(masks, boxes, FRAME, padding))


def test_paste_float32_mask_head_size() -> None:
    boxes = torch.tensor([[2.0, 3.0, 20.0, 17.0], [0.0, 1.0, 6.0, 30.0]])
    masks = torch.rand(2, 28, 28)
    got = ops.paste_masks(masks, boxes, FRAME)
    assert got.dtype == torch.float32
    torch.testing.assert_close(
        got.double(),
        brute.paste_masks(masks.double(), boxes.double(), FRAME, 1),
        rtol=1e-5,
        atol=1e-5,
    )


def test_paste_full_mask_fills_expanded_box() -> None:
    # An all-ones mask is 1 well inside its box and fades only at the padding.
    masks = torch.ones(1, 28, 28)
    got = ops.paste_masks(masks, torch.tensor([[5.0, 5.0, 25.0, 20.0]]), FRAME)
    torch.testing.assert_close(got[0, 7:19, 7:24], torch.ones(12, 17))
    assert torch.all(got[0, :, :4] == 0) and torch.all(got[0, :3] == 0)


def test_paste_rejects_non_square_masks() -> None:
    with pytest.raises(ValueError, match="masks must be \\(N, M, M\\)"):
        ops.paste_masks(torch.zeros(1, 4, 5), torch.zeros(1, 4), FRAME)


@pytest.mark.parametrize("case", BOX_CASES)
@pytest.mark.parametrize("threshold", [0.5, 0.0, 0.93])
def test_paste_binary_is_the_thresholded_paste(case: str, threshold: float) -> None:
    boxes = torch.tensor(BOX_CASES[case], dtype=torch.float64).reshape(-1, 4)
    masks = torch.rand(len(boxes), 6, 6, dtype=torch.float64)
    got = ops.paste_masks_binary(masks, boxes, FRAME, threshold)
    assert got.dtype == torch.bool and got.shape == (len(boxes), *FRAME)
    assert torch.equal(got, brute.paste_masks(masks, boxes, FRAME, 1) > threshold)


def test_paste_binary_negative_threshold_marks_the_whole_frame() -> None:
    # 0 > -0.1: outside the box counts too, exactly as thresholding the floats would.
    got = ops.paste_masks_binary(torch.zeros(1, 4, 4), torch.tensor([[2.0, 2, 9, 9]]), FRAME, -0.1)
    assert bool(got.all())
