"""Ingest tests: the real RTSP server fixtures, small timeouts."""

from __future__ import annotations

from tests.support.rtsp import rtsp_server, rtsp_server_factory

__all__ = ["rtsp_server", "rtsp_server_factory"]
