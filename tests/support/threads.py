"""``one_thread``: torch on one CPU thread for the length of a block or a test.

The one helper for it (a context manager; fixtures wrap it). Two reasons to
use it: bit-for-bit comparisons of two runs (with several threads some CPU
kernels reduce in an order that varies from run to run), and speed on the
shared 2-core CI machine, where with 2 intra-op threads every parallel
region waits for a descheduled thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["one_thread"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one CPU thread inside the block; the previous count after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
