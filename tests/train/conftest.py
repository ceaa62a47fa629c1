"""Fixtures of the trainer's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.coco import write_coco
from tests.support.rtsp import rtsp_server, rtsp_server_factory
from tests.support.threads import one_thread

__all__ = ["coco_dir", "rtsp_server", "rtsp_server_factory"]


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Tiny models on a shared 2-core machine: one thread is fastest (no spinning
    between busy cores) and makes two runs bit-for-bit comparable."""
    with one_thread():
        yield


@pytest.fixture
def coco_dir(tmp_path: Path) -> Path:
    """A COCO dataset of 4 tiny images; returns the JSON's path."""
    return write_coco(tmp_path / "coco")
