"""The GPU image's wheel carries the kernels: built as the Dockerfile builds it.

The test reads the Dockerfile: the files it copies into ``/app`` before the
``pip wheel`` line, and that line itself, and runs the same command on a
copy of those files (the checkout stays clean). The wheel must hold every
C++ source of ``ops/csrc`` (as ``streamseg/ops/csrc``) and every Triton
kernel module, and the installed package must find its sources.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "ops" / "csrc"

pytestmark = pytest.mark.slow


def docker_build_steps() -> tuple[list[str], list[str]]:
    """The paths the Dockerfile copies before building, and its ``pip wheel`` arguments."""
    text = (REPO / "Dockerfile").read_text()
    head, wheel_line = text.split("RUN pip wheel", 1)
    copied: list[str] = []
    for line in head.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied += shlex.split(line)[1:-1]
    command = re.split(r"\s*(?:\\\n|&&)", wheel_line, maxsplit=1)[0]
    return copied, shlex.split(command)


def build_wheel(tmp_path: Path) -> Path:
    copied, args = docker_build_steps()
    assert "setup.py" in copied and "ops" in copied, copied
    src = tmp_path / "app"
    src.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.so", "*.o", "*.egg-info")
    for name in copied:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=junk)
        else:
            shutil.copy2(REPO / name, src / name)
    out = tmp_path / "dist"
    args = [str(out) if a == "/tmp/dist" else a for a in args]
    # The Dockerfile's build runs with build isolation (setuptools from the
    # registry); the same here, with this interpreter's pip.
    cmd = [sys.executable, "-m", "pip", "wheel", *args, "-q"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=src, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("streamseg-*.whl")
    return wheel


def test_docker_wheel_ships_cpp_and_triton_kernels(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    cpp = {
        f"streamseg/ops/csrc/{p.relative_to(CSRC).as_posix()}"
        for p in CSRC.rglob("*")
        if p.is_file()
    }
    assert cpp and cpp <= names, sorted(cpp - names)
    assert not any(n.endswith((".cu", ".cuh")) for n in names)
    from streamseg.ops import triton as gpu_kernels

    triton_modules = {f"streamseg/ops/triton/{m}.py" for m in gpu_kernels.KERNEL_MODULES}
    assert triton_modules <= names, sorted(triton_modules - names)
    assert "streamseg/schemas/detections.schema.json" in names

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # what a non-editable install lays down
    probe = (
        "from streamseg.ops import _native; d = _native.sources_dir(); print(d); "
        "missing = [str(f) for f in _native.sources() if not f.is_file()]; "
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
