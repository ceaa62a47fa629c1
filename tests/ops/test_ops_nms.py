"""NMS and batched NMS against a brute-force greedy loop."""

from __future__ import annotations

import pytest
import torch

from streamseg import ops
from tests.ops import brute


def clustered_boxes(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Realistic detections: jittered copies around a few objects."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.rand(max(n // 8, 1), 2, generator=g) * 200
    sizes = torch.rand(centres.shape[0], 2, generator=g) * 40 + 5
    pick = torch.randint(0, centres.shape[0], (n,), generator=g)
    c = centres[pick] + torch.randn(n, 2, generator=g) * 4
    s = sizes[pick] * (1 + torch.randn(n, 2, generator=g) * 0.1)
    boxes = torch.cat([c - s / 2, c + s / 2], 1)
    return boxes, torch.rand(n, generator=g)


CASES = {
    "empty": (torch.zeros(0, 4), torch.zeros(0)),
    "one": (torch.tensor([[0.0, 0, 4, 4]]), torch.tensor([0.3])),
    "equal_scores": (
        torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 10, 10], [50, 50, 60, 60]]),
        torch.tensor([0.5, 0.5, 0.5, 0.5]),
    ),
    "degenerate": (
        torch.tensor([[3.0, 3, 3, 3], [3, 3, 3, 3], [5, 5, 2, 8], [5, 5, 2, 8], [0, 0, 4, 4]]),
        torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5]),
    ),
    "out_of_frame": (
        torch.tensor([[-20.0, -20, -5, -5], [-21, -20, -5, -5], [1e4, 1e4, 1e4 + 9, 1e4 + 9]]),
        torch.tensor([0.2, 0.9, 0.4]),
    ),
    "clustered": clustered_boxes(200),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.9])
def test_nms_matches_brute(case: str, threshold: float) -> None:
    boxes, scores = CASES[case]
    got = ops.nms(boxes, scores, threshold)
    assert got.dtype == torch.int64
    assert got.tolist() == brute.batched_nms(boxes, scores, None, threshold)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nms_dtypes(dtype: torch.dtype) -> None:
    boxes, scores = clustered_boxes(300, seed=3)
    got = ops.nms(boxes.to(dtype), scores.to(dtype), 0.5)
    assert got.tolist() == brute.batched_nms(boxes.to(dtype), scores.to(dtype), None, 0.5)


@pytest.mark.parametrize("num_classes", [1, 3, 80])
@pytest.mark.parametrize("case", ["clustered", "equal_scores", "degenerate", "empty"])
def test_batched_nms_matches_brute(num_classes: int, case: str) -> None:
    boxes, scores = CASES[case]
    idxs = torch.randint(0, num_classes, (len(boxes),))
    got = ops.batched_nms(boxes, scores, idxs, 0.5)
    assert got.tolist() == brute.batched_nms(boxes, scores, idxs, 0.5)


def test_batched_nms_classes_do_not_suppress_each_other() -> None:
    boxes = torch.tensor([[0.0, 0, 10, 10]] * 3)
    scores = torch.tensor([0.9, 0.8, 0.7])
    assert ops.batched_nms(boxes, scores, torch.tensor([0, 1, 0]), 0.5).tolist() == [0, 1]


def test_nms_rejects_mismatched_scores() -> None:
    with pytest.raises(ValueError, match="scores must be \\(N,\\)"):
        ops.nms(torch.zeros(3, 4), torch.zeros(2), 0.5)
