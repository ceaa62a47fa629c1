"""IdState: vectorised per-track state equals a plain dict."""

from __future__ import annotations

import numpy as np

from streamseg.track.rules.idstate import IdState


def test_idstate_matches_a_dict() -> None:
    rng = np.random.default_rng(0)
    state, ref = IdState(default=-1), {}
    for _ in range(200):
        ids = rng.choice(50, size=int(rng.integers(0, 12)), replace=False).astype(np.int64)
        op = rng.integers(0, 3)
        if op == 0:
            vals = rng.integers(0, 3, len(ids))
            state.set(ids, vals)
            ref.update(zip(ids.tolist(), vals.tolist(), strict=True))
        elif op == 1:
            before = state.drop(ids)
            assert before.tolist() == [ref.pop(i, -1) for i in ids.tolist()]
        assert state.get(ids).tolist() == [ref.get(i, -1) for i in ids.tolist()]
        assert len(state) == len(ref)
        assert state.ids_with(1).tolist() == sorted(k for k, v in ref.items() if v == 1)
        assert state.count(2) == sum(1 for v in ref.values() if v == 2)
    assert state.get(np.zeros(0, np.int64)).shape == (0,)
