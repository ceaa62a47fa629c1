"""Service tests: ``streamseg serve`` end to end against real servers.

Each test runs the real service (the small Mask R-CNN with random weights,
small frames) as a subprocess against a real redis-server and GStreamer's
RTSP server, and checks what reaches Redis, ``/readyz`` and the logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.rtsp import rtsp_server, rtsp_server_factory
from tests.support.serve import ServeProcess

__all__ = ["rtsp_server", "rtsp_server_factory", "serve"]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    """``serve(config, **options) -> ServeProcess`` (started); killed after the test."""
    procs: list[ServeProcess] = []

    def start(config: dict | None, **options: object) -> ServeProcess:  # type: ignore[type-arg]
        proc = ServeProcess(config, tmp_path, **options)  # type: ignore[arg-type]
        procs.append(proc)
        return proc.start()

    try:
        yield start
    finally:
        for proc in procs:
            proc.kill()
