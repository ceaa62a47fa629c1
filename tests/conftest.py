"""Shared fixtures: a real redis-server, a CLI runner, deterministic torch."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Without a GPU the Triton kernels run in Triton's interpreter (tests/ops).
# Triton reads this when it is first imported (torch._dynamo imports it), so
# it is set here, before any test module is collected.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from tests.support.servers import RedisServer, cli_env

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _deterministic_torch() -> None:
    torch.manual_seed(0)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server for one test (stop()/start() to simulate outages)."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def run_cli(*args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    """Run ``python -m streamseg ARGS`` and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "streamseg", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(),
        cwd=REPO,
        **kwargs,
    )


@pytest.fixture
def cli():  # type: ignore[no-untyped-def]
    return run_cli
