"""Logs scrub secrets from everything they print: messages, tracebacks and stacks."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from streamseg.runtime.logs import setup_logging


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    """Take the handler this test installs off the root logger again (its stream closes)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _fail(url: str) -> None:
    raise ConnectionError(f"cannot open {url}")


def test_tracebacks_are_redacted_like_messages(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("INFO", secrets=["redis-pw-42"])
    log = logging.getLogger("streamseg.test")
    try:
        try:
            _fail("rtsp://admin:hunter2@cam:554/s")
        except ConnectionError as exc:
            raise RuntimeError("redis said: bad password redis-pw-42") from exc
    except RuntimeError:
        log.exception("camera %s failed", "rtsp://admin:hunter2@cam:554/s")
    log.warning("where we were", stack_info=True)
    err = capsys.readouterr().err
    assert "Traceback" in err and "ConnectionError: cannot open rtsp://admin:***@cam" in err
    assert "camera rtsp://admin:***@cam:554/s failed" in err
    assert "Stack (most recent call last)" in err
    assert "hunter2" not in err and "redis-pw-42" not in err
