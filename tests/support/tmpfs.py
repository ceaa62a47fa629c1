"""A small real filesystem for the full-disk tests: a tmpfs mounted by the test (as root).

``tmpfs`` (a fixture) mounts one of the given size on a fresh folder and
unmounts it after the test. Where mounting is impossible (not root, no
``mount``, a container without the capability) the test is skipped, saying
why; nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "tmpfs"]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """``tmpfs(size_bytes) -> folder``: a new tmpfs of that size, unmounted afterwards."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        folder = tmp_path / f"tmpfs{len(mounted)}"
        folder.mkdir()
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root and mount(8): the full-disk test cannot run")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    try:
        yield mount
    finally:
        for folder in reversed(mounted):
            subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


def fill(path: Path, chunk: int = 4096) -> int:
    """Write ``path`` until the filesystem is full (``ENOSPC``); returns the bytes written."""
    written = 0
    block = b"\0" * chunk
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                written += f.write(block)
            except OSError:
                if chunk == 1:
                    return written
                chunk = max(1, chunk // 8)
                block = b"\0" * chunk
