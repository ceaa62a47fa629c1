"""Per-track state of a rule, read and written for a whole frame's tracks at once."""

from __future__ import annotations

import operator
from itertools import repeat

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["IdState", "Slots"]

I64 = NDArray[np.int64]
I8 = NDArray[np.int8]

# The ids of a frame as Python ints, found once and passed to ``get`` and ``set``.
Slots = list[int]


class IdState:
    """A small integer (int8) per track id, with ``default`` for ids never set.

    A dict keyed by track id, read and written through C-level iteration
    (``map`` of the dict's own methods into ``np.fromiter``): no Python loop
    per track, and, unlike ``np.searchsorted`` and ``np.argsort`` on sorted
    id arrays (what this class used before), no numpy call that gives up the
    GIL, which in ``serve`` hands it to another thread for a whole switch
    interval. A frame that reads and then writes the same ids converts them
    once (:meth:`find`, then ``get`` / ``set`` with ``slots``).

    Example:
        >>> s = IdState(default=-1)
        >>> s.set(np.array([7, 3]), np.array([1, 0]))
        >>> s.get(np.array([3, 5, 7])).tolist()
        [0, -1, 1]
    """

    def __init__(self, default: int) -> None:
        self.default = default
        self._values: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._values)

    @property
    def ids(self) -> I64:
        """The stored ids, ascending."""
        return np.array(sorted(self._values), np.int64)

    @property
    def values(self) -> I8:
        """Their values (in the order of ``ids``)."""
        v = self._values
        return np.array([v[k] for k in sorted(v)], np.int8)

    def find(self, ids: I64) -> Slots:
        """``ids (K,)`` as the ``slots`` that ``get`` and ``set`` take."""
        out: Slots = ids.tolist()
        return out

    def get(self, ids: I64, slots: Slots | None = None) -> I8:
        """``(K,)`` values of ``ids (K,)`` (``default`` for unknown ids)."""
        keys = ids.tolist() if slots is None else slots
        found = map(self._values.get, keys, repeat(self.default))
        return np.fromiter(found, np.int8, len(keys))

    def set(self, ids: I64, values: ArrayLike, slots: Slots | None = None) -> None:
        """Store ``values (K,)`` (or one value for all) for distinct ``ids (K,)``."""
        keys = ids.tolist() if slots is None else slots
        vals = np.asarray(values, np.int8)
        if vals.ndim == 0:
            self._values.update(dict.fromkeys(keys, int(vals)))
        else:
            self._values.update(zip(keys, vals.tolist(), strict=True))

    def drop(self, ids: I64) -> I8:
        """Forget ``ids``; returns their values before (``default`` if unknown)."""
        keys = ids.tolist()
        return np.fromiter(map(self._values.pop, keys, repeat(self.default)), np.int8, len(keys))

    def ids_with(self, value: int) -> I64:
        """The ids (ascending) whose value is ``value``."""
        return np.array(sorted(k for k, v in self._values.items() if v == value), np.int64)

    def count(self, value: int) -> int:
        return operator.countOf(self._values.values(), value)
