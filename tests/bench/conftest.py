"""Fixtures of the benchmark tests: the ops tests' built kernels (``native``), RTSP cameras."""

from __future__ import annotations

from tests.ops.conftest import native
from tests.support.rtsp import rtsp_server, rtsp_server_factory

__all__ = ["native", "rtsp_server", "rtsp_server_factory"]
