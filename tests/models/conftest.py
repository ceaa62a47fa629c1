"""Model tests run torch single-threaded.

The CI machine has 2 cores shared with other jobs; with 2 intra-op threads
every parallel region waits for a descheduled thread, which made these tests
up to 6x slower than with one thread under load.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.threads import one_thread


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield
