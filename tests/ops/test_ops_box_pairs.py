"""box_overlap_pairs: the C++ sweep finds exactly the pairs and IoU floats of testing every pair."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from streamseg import ops
from streamseg.ops import reference as ref


def brute(a: np.ndarray, b: np.ndarray) -> tuple[list[int], list[int], list[float]]:
    """Every pair in plain Python, the IoU written as numpy would compute it."""
    rows, cols, ious = [], [], []
    for i, p in enumerate(a.tolist()):
        for j, q in enumerate(b.tolist()):
            if np.isnan(p + q).any():
                continue  # NaN edges overlap nothing (numpy's min/max pass NaN on)
            iw = min(p[2], q[2]) - max(p[0], q[0])
            ih = min(p[3], q[3]) - max(p[1], q[1])
            if iw > 0 and ih > 0:
                inter = iw * ih
                union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter
                rows.append(i)
                cols.append(j)
                ious.append(inter / max(union, 1e-12))
    return rows, cols, ious


def check(a: np.ndarray, b: np.ndarray) -> None:
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    want = brute(a, b)
    for got in (ops.box_overlap_pairs(ta, tb), ref.box_overlap_pairs(ta, tb)):
        rows, cols, iou = got
        assert rows.dtype == cols.dtype == torch.int64 and iou.dtype == torch.float64
        assert (rows.tolist(), cols.tolist()) == want[:2]
        # The same floats, not approximately (NaN where the union is: inf - inf).
        np.testing.assert_array_equal(iou.numpy(), np.array(want[2], np.float64))


def random_boxes(gen: np.random.Generator, n: int, extent: float = 200.0) -> np.ndarray:
    xy = gen.uniform(-20, extent, (n, 2))
    wh = gen.uniform(0, 60, (n, 2))
    wh[gen.random(n) < 0.1] = 0.0  # some empty boxes
    return np.concatenate((xy, xy + wh), axis=1)


@pytest.mark.parametrize(("n", "m"), [(0, 5), (5, 0), (1, 1), (7, 30), (100, 100), (300, 250)])
def test_pairs_equal_every_pair_tested(n: int, m: int) -> None:
    gen = np.random.default_rng(n * 1000 + m)
    check(random_boxes(gen, n), random_boxes(gen, m))


def test_touching_nested_reversed_and_not_finite_boxes() -> None:
    a = np.array(
        [
            [0.0, 0, 10, 10],
            [10, 0, 20, 10],  # touches the first: no pair
            [2, 2, 4, 4],  # inside the first
            [5, 5, 1, 1],  # x2 < x1: overlaps nothing
            [np.nan, 0, 10, 10],
            [-np.inf, 0, np.inf, 10],
        ]
    )
    check(a, a)
    check(a, a[:3])
    check(a[:3], a)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(*[st.integers(-5, 40)] * 4), max_size=12),
    st.lists(st.tuples(*[st.integers(-5, 40)] * 4), max_size=12),
)
def test_pairs_on_small_integer_boxes(a: list[tuple[int, ...]], b: list[tuple[int, ...]]) -> None:
    """Integer corners: many shared edges, equal left edges and degenerate boxes."""
    check(np.array(a, np.float64).reshape(-1, 4), np.array(b, np.float64).reshape(-1, 4))


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="float64"):
        ops.box_overlap_pairs(torch.zeros(2, 4), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        ops.box_overlap_pairs(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 4))
