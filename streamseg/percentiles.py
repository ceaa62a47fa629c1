"""The one percentile of the package: nearest rank, as every figure reports it.

The benchmarks' latencies (``bench model``, ``bench pipeline``) and the
service's own (``PipelineStats``) are read with it, so a p99 means the same
in each.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["percentile", "percentiles"]


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0-100) of ``values`` (any order).

    >>> percentile([3.0, 1.0, 2.0], 50)
    2.0

    Raises:
        ValueError: ``values`` is empty (a caller with nothing to report says so).
    """
    return percentiles(values, (q,))[0]


def percentiles(values: Iterable[float], qs: Iterable[float]) -> list[float]:
    """The nearest-rank percentiles ``qs`` (0-100) of ``values``, sorted once.

    >>> percentiles([4.0, 1.0, 3.0, 2.0], (0, 100))
    [1.0, 4.0]

    Raises:
        ValueError: ``values`` is empty.
    """
    data = sorted(values)
    if not data:
        raise ValueError("the percentile of no values")
    top = len(data) - 1
    return [data[min(top, round(q / 100 * top))] for q in qs]
