"""Packaging hook: ship the native kernel sources inside the package.

The C++ kernel sources live in ``ops/csrc`` at the repository root. A wheel
carries a copy as ``streamseg/ops/csrc`` so that a regular (non-editable)
install can compile them on first use; ``streamseg.ops._native`` looks
there first, then in the source checkout. Everything else about the
package is in ``pyproject.toml``.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

KERNELS = Path(__file__).resolve().parent / "ops" / "csrc"
KERNEL_SUFFIXES = (".h", ".cpp")


class BuildPyWithKernels(build_py):
    """``build_py`` plus a copy of ``ops/csrc`` into ``streamseg/ops/csrc``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install compiles the checkout's ops/csrc
        if not KERNELS.is_dir():
            raise SystemExit(f"{KERNELS} is missing: build streamseg from a full source tree")
        target = Path(self.build_lib) / "streamseg" / "ops" / "csrc"
        for src in sorted(KERNELS.rglob("*")):
            if src.is_file() and src.suffix in KERNEL_SUFFIXES:
                dest = target / src.relative_to(KERNELS)
                self.mkpath(str(dest.parent))
                self.copy_file(str(src), str(dest))


setup(cmdclass={"build_py": BuildPyWithKernels})
