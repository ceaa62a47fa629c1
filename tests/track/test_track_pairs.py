"""Box pairs through ctypes (GIL kept) equal the torch op's, buffers growing as needed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from streamseg import ops
from streamseg.track import pairs


@pytest.fixture(autouse=True)
def _native_built() -> None:
    # The kernels build on every machine of this project (scripts/setup.sh installs
    # g++): a missing library is a broken build to report, not a reason to skip.
    assert ops.native_cpu(), "the native kernels did not load: see streamseg.ops._native.status()"


def _boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    xy = rng.uniform(0, 400, (n, 2))
    return np.concatenate((xy, xy + rng.uniform(0, 60, (n, 2))), axis=1)


@pytest.mark.parametrize(("n", "m"), [(0, 3), (3, 0), (1, 1), (40, 60), (300, 300)])
def test_pairs_equal_the_torch_op(n: int, m: int) -> None:
    rng = np.random.default_rng(n + m)
    a, b = _boxes(rng, n), _boxes(rng, m)
    if n > 2 and m > 2:
        a[0] = b[0]  # identical
        a[1] = (b[1, 0], b[1, 1], b[1, 0], b[1, 3])  # no width
        a[2, 0] = np.nan
        b[2, 2] = np.inf
    got = pairs.overlap_pairs_native(a, b)
    assert got is not None
    want = ops.box_overlap_pairs(torch.from_numpy(a), torch.from_numpy(b))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w.numpy())
        assert g.dtype == w.numpy().dtype


def test_more_pairs_than_the_buffers_hold_grow_them() -> None:
    box = np.array([[0.0, 0.0, 10.0, 10.0]])
    many = np.repeat(box, 40, axis=0)  # 1,600 pairs, more than the first 1,024 slots
    found = pairs.overlap_pairs_native(many, many)
    assert found is not None
    r, c, v = found
    assert len(r) == 1600 and (v == 1.0).all()
    assert r.tolist() == np.repeat(np.arange(40), 40).tolist()
    assert c.tolist() == np.tile(np.arange(40), 40).tolist()
    again = pairs.overlap_pairs_native(box, box)
    assert again is not None
    r2 = again[0]
    assert r2.tolist() == [0]  # a copy: the later call does not change the earlier result
    assert len(r) == 1600 and r[-1] == 39
