"""Fleet tests: real Redis (``redis_server``) and, for the bench, the real RTSP server."""

from __future__ import annotations

from tests.support.rtsp import rtsp_server, rtsp_server_factory

__all__ = ["rtsp_server", "rtsp_server_factory"]
