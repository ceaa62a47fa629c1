"""The one percentile of the package: nearest rank, as every figure reports it.

The benchmarks' latencies (``bench model``, ``bench pipeline``) and the
service's own (``PipelineStats``) are read with it, so a p99 means the same
in each.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["percentile"]


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0-100) of ``values`` (any order).

    >>> percentile([3.0, 1.0, 2.0], 50)
    2.0

    Raises:
        ValueError: ``values`` is empty (a caller with nothing to report says so).
    """
    data = sorted(values)
    if not data:
        raise ValueError("the percentile of no values")
    return data[min(len(data) - 1, round(q / 100 * (len(data) - 1)))]
