"""``launch``: run a Triton kernel, or its PyTorch reference where the kernel cannot run.

Every op of :mod:`streamseg.ops.triton` launches through it. What failed
and what has run once is process state, kept here: ``reference_ops`` lists
the ops that fell back (``streamseg.ops._native.status()`` reports it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import Tensor

from streamseg.ops._mode import ENV_VAR, NativeOpsError, mode

__all__ = ["clear_kernel_failures", "launch", "reference_ops"]

_log = logging.getLogger("streamseg.ops")
R = TypeVar("R")


class _Kernels:
    def __init__(self) -> None:
        # Triton ops whose kernel failed: op -> the error (the reference runs instead).
        self.failed: dict[str, str] = {}
        # (op, device, dtype) whose kernel has run once: its later errors are not launch failures.
        self.proven: set[tuple[str, str, str]] = set()
        self.lock = threading.Lock()


_STATE = _Kernels()


def launch(op: str, witness: Tensor, kernel: Callable[[], R], reference: Callable[[], R]) -> R:
    """Run ``op``'s Triton kernel (``kernel()``), or its reference where the kernel failed.

    Args:
        op: the public op's name (``nms``, ``decode_boxes``, ...).
        witness: the op's main input; its device and dtype pick the
            compiled kernel, and a non-empty one makes the kernel launch.
        kernel: runs the Triton kernel(s) and returns the result.
        reference: the same result from the PyTorch reference.

    The first call for a (device, dtype) that launches is the one that can
    fail to launch: if it raises, ``auto`` mode logs one warning naming the
    op and the error and answers with ``reference()``, now and for every
    later call of ``op``; ``native`` mode raises :class:`NativeOpsError`.
    After a first call that succeeded, errors propagate (they are not
    launch failures). While tracing (``torch.compile``, fake tensors) the
    kernel is traced as is.
    """
    if op in _STATE.failed:
        return reference()
    key = (op, str(witness.device), str(witness.dtype))
    if key in _STATE.proven or _tracing(witness):
        return kernel()
    try:
        out = kernel()
    except Exception as exc:
        _kernel_failed(op, witness, exc)
        return reference()
    if witness.numel() > 0:
        _STATE.proven.add(key)
    return out


def _tracing(t: Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return torch.compiler.is_compiling() or is_fake(t)


def _kernel_failed(op: str, witness: Tensor, exc: Exception) -> None:
    """Record that ``op``'s kernel cannot run; raise instead in ``native`` mode."""
    reason = f"{type(exc).__name__}: {exc}".strip().rstrip(".")
    where = f"{witness.device} {str(witness.dtype).removeprefix('torch.')}"
    if mode() == "native":
        raise NativeOpsError(
            f"{ENV_VAR}=native but the GPU kernel of {op} failed on {where}: {reason}"
        ) from exc
    with _STATE.lock:
        if op in _STATE.failed:
            return
        _STATE.failed[op] = reason
    _log.warning(
        "streamseg GPU kernel of %s failed on %s, using the PyTorch reference for %s from "
        "now on (slower). Error: %s. Please report it; set %s=reference to silence this.",
        op, where, op, reason, ENV_VAR,
    )  # fmt: skip


def reference_ops() -> dict[str, str]:
    """The Triton ops replaced by the reference in this process: op -> the kernel's error."""
    with _STATE.lock:
        return dict(_STATE.failed)


def clear_kernel_failures() -> None:
    """Forget failed and proven kernels (tests; a new process starts without them)."""
    with _STATE.lock:
        _STATE.failed.clear()
        _STATE.proven.clear()
