"""``STREAMSEG_OPS``: whether the ops use their native kernels (``auto``,
``native``) or only the PyTorch references (``reference``).

Read by the loader of the kernels (:mod:`streamseg.ops._native`) and by the
guard of every Triton launch (:mod:`streamseg.ops._launch`).
"""

from __future__ import annotations

import os

__all__ = ["ENV_VAR", "NativeOpsError", "mode"]

ENV_VAR = "STREAMSEG_OPS"
_MODES = ("auto", "reference", "native")


class NativeOpsError(RuntimeError):
    """The native kernels were required (``STREAMSEG_OPS=native``) but could not load."""


def mode() -> str:
    """The ``STREAMSEG_OPS`` setting: ``auto``, ``reference`` or ``native``."""
    value = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if value not in _MODES:
        raise ValueError(
            f"{ENV_VAR}={value!r} is not one of {', '.join(_MODES)}; "
            f"unset it to use the native kernels when they build"
        )
    return value
