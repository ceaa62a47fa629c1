"""Logging for long-running commands: plain lines, with secrets scrubbed.

Everything a record prints is scrubbed: its message, and the traceback and
stack of a ``log.exception`` (an exception's text may quote a URL with its
password). On a terminal each record first clears the status line, so logs and the
live status do not overwrite each other.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from streamseg.redact import redact_text

__all__ = ["setup_logging"]


class _Redact(logging.Filter):
    """Scrubs URL passwords (and known secrets) from every formatted message."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message, *self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        return True


class _RedactingFormatter(logging.Formatter):
    """Formats a record, then scrubs the whole text: message, traceback and stack."""

    def __init__(self, fmt: str, datefmt: str, secrets: Sequence[str]) -> None:
        super().__init__(fmt, datefmt)
        self.secrets = tuple(s for s in secrets if s)

    def formatException(self, ei: Any) -> str:
        return redact_text(super().formatException(ei), *self.secrets)

    def formatStack(self, stack_info: str) -> str:
        return redact_text(super().formatStack(stack_info), *self.secrets)

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record), *self.secrets)


class _Handler(logging.StreamHandler):
    def emit(self, record: logging.LogRecord) -> None:
        if self.stream.isatty():
            self.stream.write("\r\x1b[2K")
        super().emit(record)


def setup_logging(level: str = "INFO", *, secrets: Sequence[str] = ()) -> None:
    """Log to stderr as ``time level name: message``; idempotent."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _Handler):
            root.removeHandler(h)
    handler = _Handler(sys.stderr)
    handler.setFormatter(
        _RedactingFormatter(
            "%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S", secrets
        )
    )
    handler.addFilter(_Redact(secrets))
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("urllib3", "opentelemetry"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
