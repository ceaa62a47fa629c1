"""The package's one percentile: nearest rank, any order, nothing to report is an error."""

from __future__ import annotations

import pytest

from streamseg.percentiles import percentile


def test_nearest_rank_of_unsorted_values() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert [percentile(values, q) for q in (0, 25, 50, 90, 99, 100)] == [1, 2, 3, 5, 5, 5]
    assert percentile([7.0], 99) == 7.0
    assert percentile(iter([2.0, 1.0]), 50) == 1.0  # rank round(0.5) = 0: half to even
    assert values == [5.0, 1.0, 4.0, 2.0, 3.0]  # the caller's list is left as it was


def test_no_values_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
