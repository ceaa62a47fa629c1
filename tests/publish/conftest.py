"""Fixtures of the sink tests: a real mosquitto broker per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import MosquittoServer


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MosquittoServer]:
    server = MosquittoServer(tmp_path / "mosquitto")
    server.start()
    try:
        yield server
    finally:
        server.stop()
