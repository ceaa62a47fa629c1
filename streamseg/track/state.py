"""The tracker's per-track state as parallel numpy arrays (one row per live track)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from streamseg.track.config import TrackingConfig

__all__ = ["CONFIRMED", "LOST", "TENTATIVE", "TrackTable"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

TENTATIVE, CONFIRMED, LOST = 0, 1, 2  # TrackTable.state


class TrackTable:
    """Rows of live tracks.

    Columns: ``ids`` (int64), ``state`` (int8: 0 tentative, 1 confirmed,
    2 lost), ``hits`` / ``misses`` (matched frames / frames missed since the
    last match), ``score`` (smoothed), ``votes`` (``(T, C)`` decayed,
    score-weighted class votes), ``first_seen`` / ``last_seen`` (capture
    time, s), ``first_box`` / ``prev_box`` / ``last_box`` (``(T, 4)`` xyxy
    observed boxes; ``prev_box`` NaN until a second observation), ``det``
    (detection index in the current frame, -1 when unmatched), ``shadowed``
    (frames in a row its detection overlapped an older track's), and for mask
    matching ``grid`` (``(T, h, w)`` bool), ``has_grid`` and ``grid_xy``
    (box centre when that mask was seen).
    """

    def __init__(self, num_classes: int) -> None:
        self.ids: I64 = np.zeros(0, np.int64)
        self.state: NDArray[np.int8] = np.zeros(0, np.int8)
        self.hits: I64 = np.zeros(0, np.int64)
        self.misses: I64 = np.zeros(0, np.int64)
        self.score: F64 = np.zeros(0)
        self.votes: F64 = np.zeros((0, num_classes))
        self.first_seen: F64 = np.zeros(0)
        self.last_seen: F64 = np.zeros(0)
        self.first_box: F64 = np.zeros((0, 4))
        self.prev_box: F64 = np.zeros((0, 4))
        self.last_box: F64 = np.zeros((0, 4))
        self.det: I64 = np.zeros(0, np.int64)
        self.shadowed: I64 = np.zeros(0, np.int64)
        self.grid: Tensor | None = None
        self.has_grid: NDArray[np.bool_] = np.zeros(0, bool)
        self.grid_xy: F64 = np.zeros((0, 2))
        self._label_cache: I64 | None = None

    _ARRAYS = (
        "ids", "state", "hits", "misses", "score", "votes", "first_seen", "last_seen",
        "first_box", "prev_box", "last_box", "det", "shadowed", "has_grid", "grid_xy",
    )  # fmt: skip

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def new_frame(self) -> None:
        """Forget last frame's detection indices."""
        self.det[:] = -1

    def add(self, ids: I64, state: int, boxes: F64, scores: F64, labels: I64, now: float) -> None:
        """Append tracks that start at detections ``boxes (K, 4)`` (their ``det`` set by caller)."""
        k = len(ids)
        self._widen(labels)
        votes = np.zeros((k, self.votes.shape[1]))
        votes[np.arange(k), labels] = scores
        nan = np.full((k, 4), np.nan)
        rows: dict[str, NDArray[Any]] = {
            "ids": ids, "state": np.full(k, state, np.int8), "hits": np.ones(k, np.int64),
            "misses": np.zeros(k, np.int64), "score": scores.astype(np.float64), "votes": votes,
            "first_seen": np.full(k, now), "last_seen": np.full(k, now), "first_box": boxes,
            "prev_box": nan, "last_box": boxes, "det": np.full(k, -1, np.int64),
            "shadowed": np.zeros(k, np.int64), "has_grid": np.zeros(k, bool),
            "grid_xy": np.zeros((k, 2)),
        }  # fmt: skip
        for name, value in rows.items():
            setattr(self, name, np.concatenate((getattr(self, name), value)))
        if self.grid is not None:
            pad = torch.zeros((k, *self.grid.shape[1:]), dtype=torch.bool)
            self.grid = torch.cat((self.grid, pad))
        self._label_cache = None

    def select(self, keep: NDArray[np.bool_]) -> None:
        """Keep rows where ``keep`` is true."""
        for name in self._ARRAYS:
            setattr(self, name, getattr(self, name)[keep])
        if self.grid is not None:
            self.grid = self.grid[torch.from_numpy(keep)]
        self._label_cache = None

    def observe(
        self,
        rows: I64,
        boxes: F64,
        scores: F64,
        labels: I64,
        now: float,
        settings: TrackingConfig,
    ) -> None:
        """Record matched detections on ``rows`` (boxes, smoothed score, class votes)."""
        if len(rows) == 0:
            return
        self._widen(labels)
        self.hits[rows] += 1
        self.misses[rows] = 0
        a = settings.score_smoothing
        self.score[rows] = a * self.score[rows] + (1 - a) * scores
        self.votes[rows] *= settings.label_decay
        self.votes[rows, labels] += scores
        self.prev_box[rows] = self.last_box[rows]
        self.last_box[rows] = boxes
        self.last_seen[rows] = now
        self._label_cache = None

    def set_grid(self, rows: I64, grid: Tensor, boxes: F64) -> None:
        """Store grid masks ``(K, h, w)`` for ``rows`` with their boxes' centres."""
        if self.grid is None or self.grid.shape[1:] != grid.shape[1:]:
            self.grid = torch.zeros((len(self), *grid.shape[1:]), dtype=torch.bool)
            self.has_grid[:] = False
        self.grid[torch.from_numpy(rows)] = grid
        self.has_grid[rows] = True
        self.grid_xy[rows] = (boxes[:, :2] + boxes[:, 2:]) / 2

    def labels(self) -> I64:
        """Smoothed class of every row: the class with the most votes."""
        if self._label_cache is None:
            self._label_cache = (
                np.argmax(self.votes, axis=1).astype(np.int64)
                if len(self)
                else np.zeros(0, np.int64)
            )
        return self._label_cache

    def label(self, row: int) -> int:
        return int(self.labels()[row])

    def _widen(self, labels: I64) -> None:
        if len(labels) and int(labels.max()) >= self.votes.shape[1]:
            extra = int(labels.max()) + 1 - self.votes.shape[1]
            self.votes = np.concatenate((self.votes, np.zeros((len(self), extra))), axis=1)
