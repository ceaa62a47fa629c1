"""``Trails``: the past box centres the live view and ``streamseg render`` draw."""

from __future__ import annotations

import torch

from streamseg.console.live import Trails
from streamseg.types import Instances


def _frame(boxes: list[list[float]], ids: list[int]) -> Instances:
    n = len(boxes)
    return Instances(
        image_size=(100, 100),
        boxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
        scores=torch.ones(n),
        labels=torch.ones(n, dtype=torch.int64),
        track_ids=torch.tensor(ids, dtype=torch.int64),
    )


def test_trails_keep_the_last_centres_and_forget_gone_tracks() -> None:
    trails = Trails(2)
    trails.update(_frame([[0, 0, 2, 2], [10, 10, 20, 20]], [1, -1]))
    trails.update(_frame([[2, 2, 4, 4], [50, 50, 60, 60]], [1, 2]))
    got = trails.update(_frame([[4, 4, 6, 6], [52, 52, 62, 62]], [1, 2]))
    assert got == {1: [(3.0, 3.0), (5.0, 5.0)], 2: [(55.0, 55.0), (57.0, 57.0)]}
    assert trails.update(_frame([[0, 0, 1, 1]], [2])) == {2: [(57.0, 57.0), (0.5, 0.5)]}
    untracked = _frame([[0, 0, 1, 1]], [1]).replace(track_ids=None)
    assert trails.update(untracked) == {} and Trails(0).update(_frame([[0, 0, 1, 1]], [1])) == {}
