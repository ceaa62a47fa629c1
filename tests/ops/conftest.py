"""Fixtures of the ops tests: the C++ kernels built, the Triton kernels loaded.

A C++ compiler is part of the set-up (``scripts/setup.sh`` installs g++), so
a missing one is a broken machine, not a reason to skip.

Without a GPU the Triton kernels run in Triton's interpreter on CPU tensors:
``tests/conftest.py`` sets ``TRITON_INTERPRET=1`` before anything imports
``triton`` (Triton's own library functions are made interpreted when it is
imported, and ours when they are defined). Inductor's CPU code does not use
Triton, so the rest of the suite is unaffected.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from streamseg.ops import _mode, _native


@pytest.fixture(scope="module")
def native() -> None:
    assert shutil.which("c++"), "no C++ compiler: run scripts/setup.sh (it installs g++)"
    assert _mode.mode() != "reference", "unset STREAMSEG_OPS=reference to test the native kernels"
    assert "cpu" in _native.load(), _native.status()


@pytest.fixture(scope="module")
def gpu_device() -> torch.device:
    """Where the Triton kernels run: ``cuda`` (compiled) or ``cpu`` (interpreted)."""
    from streamseg.ops import triton as gpu_kernels

    gpu_kernels.load()
    if torch.cuda.is_available():
        return torch.device("cuda")
    import triton.language.standard
    from triton.runtime.interpreter import InterpretedFunction

    from streamseg.ops.triton import nms

    for fn in (nms._scan_kernel, triton.language.standard.sum):
        assert isinstance(fn, InterpretedFunction), (
            "triton was imported before tests/conftest.py set TRITON_INTERPRET=1"
        )
    return torch.device("cpu")
