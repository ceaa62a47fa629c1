"""Box utilities: IoU, clipping, small-box removal, box coding."""

from __future__ import annotations

import math

import pytest
import torch

from streamseg import ops
from tests.ops import brute

BOX_CASES = {
    "empty": torch.zeros(0, 4),
    "one": torch.tensor([[1.0, 2.0, 5.0, 9.0]]),
    "degenerate": torch.tensor([[3.0, 3, 3, 3], [5, 5, 2, 8], [0, 0, 4, 4]]),
    "out_of_frame": torch.tensor([[-10.0, -5, 3, 4], [90, 70, 130, 140], [-4, 2, 200, 3]]),
    "random": torch.rand(30, 2).repeat(1, 2) * 50
    + torch.cat([torch.zeros(30, 2), torch.rand(30, 2) * 30], 1),
}


@pytest.mark.parametrize("case", BOX_CASES)
def test_box_iou_matches_brute(case: str) -> None:
    a = BOX_CASES[case]
    b = torch.cat([a, torch.tensor([[0.0, 0, 10, 10]])])
    got = ops.box_iou(a.double(), b.double())
    torch.testing.assert_close(got, brute.box_iou(a, b), equal_nan=True)
    assert got.shape == (len(a), len(b))


@pytest.mark.parametrize("case", BOX_CASES)
def test_clip_boxes(case: str) -> None:
    boxes = BOX_CASES[case]
    got = ops.clip_boxes(boxes, (60, 100))
    for row_in, row in zip(boxes.tolist(), got.tolist(), strict=True):
        want = [min(max(v, 0.0), 100.0 if i % 2 == 0 else 60.0) for i, v in enumerate(row_in)]
        assert row == pytest.approx(want)
    assert ops.clip_boxes(boxes[None], (60, 100)).shape == (1, *boxes.shape)


@pytest.mark.parametrize("case", BOX_CASES)
@pytest.mark.parametrize("min_size", [0.0, 1.0, 4.0])
def test_remove_small_boxes(case: str, min_size: float) -> None:
    boxes = BOX_CASES[case]
    got = ops.remove_small_boxes(boxes, min_size)
    want = [
        i
        for i, b in enumerate(boxes.tolist())
        if b[2] - b[0] >= min_size and b[3] - b[1] >= min_size
    ]
    assert got.dtype == torch.int64 and got.tolist() == want


WEIGHTS = [(1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)]


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("k", [1, 3])
def test_decode_matches_brute(weights: tuple[float, float, float, float], k: int) -> None:
    n = 12
    boxes = torch.rand(n, 2, dtype=torch.float64) * 100
    boxes = torch.cat([boxes, boxes + 1 + torch.rand(n, 2, dtype=torch.float64) * 50], 1)
    deltas = torch.randn(n, 4 * k, dtype=torch.float64) * 2
    deltas[0, 2] = 40.0  # past the clamp
    got = ops.decode_boxes(deltas, boxes, weights)
    assert got.shape == (n, k, 4)
    torch.testing.assert_close(got, brute.decode(deltas, boxes, weights, math.log(1000 / 16)))
    clamped = ops.decode_boxes(deltas, boxes, weights, clamp=0.5)
    torch.testing.assert_close(clamped, brute.decode(deltas, boxes, weights, 0.5))


@pytest.mark.parametrize("weights", WEIGHTS)
def test_encode_matches_brute_and_inverts_decode(
    weights: tuple[float, float, float, float],
) -> None:
    n = 10
    props = torch.rand(n, 2, dtype=torch.float64) * 100
    props = torch.cat([props, props + 1 + torch.rand(n, 2, dtype=torch.float64) * 50], 1)
    gt = props + torch.randn(n, 4, dtype=torch.float64) * 3
    gt[:, 2:] = torch.maximum(gt[:, 2:], gt[:, :2] + 1)
    targets = ops.encode_boxes(gt, props, weights)
    torch.testing.assert_close(targets, brute.encode(gt, props, weights))
    torch.testing.assert_close(ops.decode_boxes(targets, props, weights)[:, 0], gt)


def test_decode_empty_and_float32() -> None:
    assert ops.decode_boxes(torch.zeros(0, 8), torch.zeros(0, 4), (1, 1, 1, 1)).shape == (0, 2, 4)
    boxes = torch.tensor([[0.0, 0, 10, 20]])
    out = ops.decode_boxes(torch.zeros(1, 4), boxes, (10, 10, 5, 5))
    assert out.dtype == torch.float32 and out[0, 0].tolist() == [0, 0, 10, 20]


def test_bad_shapes_name_the_argument() -> None:
    with pytest.raises(ValueError, match="boxes must be a \\(N, 4\\)"):
        ops.nms(torch.zeros(3, 5), torch.zeros(3), 0.5)
    with pytest.raises(ValueError, match="b must be a \\(N, 4\\)"):
        ops.box_iou(torch.zeros(3, 4), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="deltas"):
        ops.decode_boxes(torch.zeros(3, 5), torch.zeros(3, 4), (1, 1, 1, 1))
