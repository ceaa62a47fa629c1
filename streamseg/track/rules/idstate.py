"""Per-track state of a rule, read and written for a whole frame's tracks at once."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["IdState"]

I64 = NDArray[np.int64]
I8 = NDArray[np.int8]


class IdState:
    """A small integer (int8) per track id, with ``default`` for ids never set.

    Ids are kept sorted next to their values, so reading or writing ``K``
    ids is one ``searchsorted`` instead of ``K`` dictionary look-ups.

    Example:
        >>> s = IdState(default=-1)
        >>> s.set(np.array([7, 3]), np.array([1, 0]))
        >>> s.get(np.array([3, 5, 7])).tolist()
        [0, -1, 1]
    """

    def __init__(self, default: int) -> None:
        self.default = default
        self.ids: I64 = np.zeros(0, np.int64)
        self.values: I8 = np.zeros(0, np.int8)

    def __len__(self) -> int:
        return len(self.ids)

    def _find(self, ids: I64) -> tuple[I64, NDArray[np.bool_]]:
        if len(self.ids) == 0:
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return pos, self.ids[pos] == ids

    def get(self, ids: I64) -> I8:
        """``(K,)`` values of ``ids (K,)`` (``default`` for unknown ids)."""
        pos, found = self._find(ids)
        if len(self.ids) == 0:
            return np.full(len(ids), self.default, np.int8)
        out: I8 = np.where(found, self.values[pos], self.default).astype(np.int8)
        return out

    def set(self, ids: I64, values: ArrayLike) -> None:
        """Store ``values (K,)`` for distinct ``ids (K,)``."""
        vals = np.broadcast_to(np.asarray(values, np.int8), ids.shape)
        pos, found = self._find(ids)
        self.values[pos[found]] = vals[found]
        if not found.all():
            all_ids = np.concatenate((self.ids, ids[~found]))
            all_vals = np.concatenate((self.values, vals[~found]))
            order = np.argsort(all_ids, kind="stable")
            self.ids, self.values = all_ids[order], all_vals[order]

    def drop(self, ids: I64) -> I8:
        """Forget ``ids``; returns their values before (``default`` if unknown)."""
        if len(ids) == 0:
            return np.zeros(0, np.int8)
        before = self.get(ids)
        if len(self.ids):
            keep = ~np.isin(self.ids, ids)
            self.ids, self.values = self.ids[keep], self.values[keep]
        return before

    def ids_with(self, value: int) -> I64:
        """The ids (ascending) whose value is ``value``."""
        out: I64 = self.ids[self.values == value]
        return out

    def count(self, value: int) -> int:
        return int(np.count_nonzero(self.values == value))
