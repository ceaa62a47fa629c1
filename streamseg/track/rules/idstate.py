"""Per-track state of a rule, read and written for a whole frame's tracks at once."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["IdState", "Slots"]

I64 = NDArray[np.int64]
I8 = NDArray[np.int8]

# Where ids sit in an IdState: positions into its sorted ids, and which were found.
Slots = tuple[I64, NDArray[np.bool_]]

_END = np.iinfo(np.int64).max  # sentinel id after the last real one


class IdState:
    """A small integer (int8) per track id, with ``default`` for ids never set.

    Ids are kept sorted next to their values, so reading or writing ``K``
    ids is one ``searchsorted`` instead of ``K`` dictionary look-ups; a
    frame that reads and then writes the same ids finds them once
    (:meth:`find`, then ``get`` / ``set`` with ``slots``).

    Example:
        >>> s = IdState(default=-1)
        >>> s.set(np.array([7, 3]), np.array([1, 0]))
        >>> s.get(np.array([3, 5, 7])).tolist()
        [0, -1, 1]
    """

    def __init__(self, default: int) -> None:
        self.default = default
        # One sentinel past the end: every searchsorted position is valid.
        self._ids: I64 = np.array([_END], np.int64)
        self._values: I8 = np.array([default], np.int8)

    def __len__(self) -> int:
        return len(self._ids) - 1

    @property
    def ids(self) -> I64:
        """The stored ids, ascending."""
        return self._ids[:-1]

    @property
    def values(self) -> I8:
        """Their values."""
        return self._values[:-1]

    def find(self, ids: I64) -> Slots:
        """Where ``ids (K,)`` are stored (for ``get`` / ``set`` with ``slots``)."""
        pos = np.searchsorted(self._ids, ids)
        return pos, self._ids[pos] == ids

    def get(self, ids: I64, slots: Slots | None = None) -> I8:
        """``(K,)`` values of ``ids (K,)`` (``default`` for unknown ids)."""
        pos, found = self.find(ids) if slots is None else slots
        out: I8 = np.where(found, self._values[pos], np.int8(self.default))
        return out

    def set(self, ids: I64, values: ArrayLike, slots: Slots | None = None) -> None:
        """Store ``values (K,)`` for distinct ``ids (K,)`` (``slots``: from ``find(ids)``)."""
        vals = np.asarray(values, np.int8)
        if vals.shape != ids.shape:  # a scalar for all (broadcast_to costs ~2 us)
            vals = np.broadcast_to(vals, ids.shape)
        pos, found = self.find(ids) if slots is None else slots
        if found.all():
            self._values[pos] = vals
            return
        self._values[pos[found]] = vals[found]
        new = ~found
        all_ids = np.concatenate((self._ids, ids[new]))
        all_vals = np.concatenate((self._values, vals[new]))
        order = np.argsort(all_ids, kind="stable")
        self._ids, self._values = all_ids[order], all_vals[order]

    def drop(self, ids: I64) -> I8:
        """Forget ``ids``; returns their values before (``default`` if unknown)."""
        if len(ids) == 0:
            return np.zeros(0, np.int8)
        pos, found = self.find(ids)
        before = self.get(ids, (pos, found))
        if found.any():
            keep = np.ones(len(self._ids), bool)
            keep[pos[found]] = False
            self._ids, self._values = self._ids[keep], self._values[keep]
        return before

    def ids_with(self, value: int) -> I64:
        """The ids (ascending) whose value is ``value``."""
        out: I64 = self.ids[self.values == value]
        return out

    def count(self, value: int) -> int:
        return int(np.count_nonzero(self.values == value))
