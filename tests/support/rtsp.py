"""RTSP fixtures for tests: GStreamer's RTSP server (``streamseg.bench.rtsp_server``).

Use them from any test folder through ``tests/conftest.py`` or a local
``conftest.py`` that imports them:

* ``rtsp_server``: one running server, 160x120 H.264 at 15 fps, no auth;
* ``rtsp_server_factory(**options)``: more servers, or other options; all
  are stopped at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streamseg.bench.rtsp_server import RtspServer, gstreamer_missing

__all__ = ["RtspServer", "gstreamer_missing", "rtsp_server", "rtsp_server_factory"]


def _require_gstreamer() -> None:
    why = gstreamer_missing()
    if why is not None:
        pytest.fail(why)


@pytest.fixture
def rtsp_server_factory() -> Iterator[Callable[..., RtspServer]]:
    """``make(**options) -> RtspServer`` (started); every server stops after the test."""
    _require_gstreamer()
    servers: list[RtspServer] = []

    def make(**options: Any) -> RtspServer:
        server = RtspServer(**options)
        servers.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.kill()


@pytest.fixture
def rtsp_server(rtsp_server_factory: Callable[..., RtspServer]) -> RtspServer:
    """A running RTSP server: 160x120 H.264, 15 fps, key frame every second, no auth."""
    return rtsp_server_factory()
