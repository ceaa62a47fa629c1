"""Fixtures of the trainer's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.coco import write_coco
from tests.support.rtsp import rtsp_server, rtsp_server_factory

__all__ = ["coco_dir", "rtsp_server", "rtsp_server_factory"]


@pytest.fixture
def coco_dir(tmp_path: Path) -> Path:
    """A COCO dataset of 4 tiny images; returns the JSON's path."""
    return write_coco(tmp_path / "coco")
