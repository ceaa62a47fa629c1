"""The ``native`` fixture: the C++ kernels built, or a failure that names the fix.

A C++ compiler is part of the set-up (``scripts/setup.sh`` installs g++), so
a missing one is a broken machine, not a reason to skip.
"""

from __future__ import annotations

import shutil

import pytest

from streamseg.ops import _native


@pytest.fixture(scope="module")
def native() -> None:
    assert shutil.which("c++"), "no C++ compiler: run scripts/setup.sh (it installs g++)"
    assert _native.mode() != "reference", "unset STREAMSEG_OPS=reference to test the native kernels"
    assert "cpu" in _native.load(), _native.status()
