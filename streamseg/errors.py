"""The one base of the mistakes met while starting: what is wrong, where, how to fix it.

A :class:`StartupError` is a user mistake found while a command starts (a
checkpoint that does not fit, a backend this machine cannot run, a rule
naming a class the model lacks, a camera that is not there). It carries

* ``message``: what is wrong, in words (``str(exc)``);
* ``field``: the pipeline.yaml field to change (``model.weights``,
  ``alerts.cameras.gate.rules[0].classes``), or ``None``;
* ``fix``: how to fix it, when the message does not already say.

Every command maps it to exit code 2 and prints ``field: message (fix)``
(``streamseg.cli.main``). It survives pickling unchanged, whatever its
subclass's ``__init__`` takes, so the model's own process
(``runtime.model_process``) sends it back to ``serve`` as it is.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StartupError"]


class StartupError(Exception):
    """A mistake in what a command was asked to start; exit code 2.

    Subclasses set ``default_field`` for the field they are about when the
    raiser gives none (a checkpoint error is about ``model.weights``).

    Example::

        >>> exc = StartupError("unknown class 'zebra'", field="alerts.cameras.a.rules[0].classes")
        >>> exc.describe()
        "alerts.cameras.a.rules[0].classes: unknown class 'zebra'"
    """

    default_field: str | None = None

    def __init__(self, message: str, *, field: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field if field is not None else self.default_field
        self.fix = fix

    def __str__(self) -> str:
        return self.message

    def describe(self) -> str:
        """``field: message (fix)``, the line a command prints before exiting 2."""
        where = f"{self.field}: " if self.field else ""
        fix = f" ({self.fix})" if self.fix else ""
        return f"{where}{self.message}{fix}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt without calling the subclass's __init__ (whose arguments may
        # differ): the message, field, fix and any other attribute come back.
        return (_restore, (type(self), self.message, dict(self.__dict__)))


def _restore(cls: type[StartupError], message: str, state: dict[str, Any]) -> StartupError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(state)
    return exc
