"""A built wheel carries the kernel sources, and the installed package finds them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "ops" / "csrc"

pytestmark = pytest.mark.slow


def build_wheel(tmp_path: Path) -> Path:
    """``pip wheel`` of a copy of the source tree (the checkout stays clean)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(REPO / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.so", "*.o", "*.egg-info")
    for folder in ("streamseg", "ops"):
        shutil.copytree(REPO / folder, src / folder, ignore=junk)
    out = tmp_path / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*cmd, "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("streamseg-*.whl")
    return wheel


def test_wheel_ships_kernel_sources_and_the_loader_finds_them(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"streamseg/ops/csrc/{p.relative_to(CSRC).as_posix()}"
        for p in CSRC.rglob("*")
        if p.is_file()
    }
    assert expected and expected <= names, sorted(expected - names)
    assert "streamseg/schemas/detections.schema.json" in names

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # what a non-editable install lays down
    probe = (
        "from streamseg.ops import _native; d = _native.sources_dir(); print(d); "
        "missing = [str(f) for f in _native.sources(with_cuda=True) if not f.is_file()]; "
        "assert not missing, missing"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "STREAMSEG_OPS": "reference"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(site / "streamseg" / "ops" / "csrc")
