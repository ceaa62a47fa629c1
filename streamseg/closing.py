"""``Closing``: ``with`` for any class that has a ``close()``.

The video writer and reader, the client and its subscriptions hold a file
or a connection that ``close()`` gives back; ``with`` calls it at the end of
the block, however the block ends. They derive from :class:`Closing` instead
of each writing ``__enter__``/``__exit__`` again.

Example:
    >>> class Door(Closing):
    ...     def close(self) -> None:
    ...         print("closed")
    >>> with Door():
    ...     pass
    closed
"""

from __future__ import annotations

from typing import Self

__all__ = ["Closing"]


class Closing:
    """A base class: ``with obj:`` gives ``obj`` and calls ``obj.close()`` at the end."""

    def close(self) -> None:
        """Release what the object holds (each subclass says what)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
