"""A kernel that compiles and interprets, but cannot be launched: a parameter named ``params``.

Triton's launcher binds a kernel's arguments in a generated function whose
first line is ``params = {...}``; this kernel's ``params`` pointer is
replaced by that dict, and specialising it fails
(``TypeError: failed to specialize argument of type: dict``). The launch
check (``tests/ops/triton_launch.py --cases tests.ops.triton_launch_bad:cases``)
must reject it; the interpreter and a bare ``triton.compile`` do not.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x, params, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = i < n
    tl.store(out + i, tl.load(x + i, mask=live) * tl.load(params), mask=live)


def _scale() -> None:
    x = torch.rand(100)
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(100, 64),)](x, torch.tensor([2.0]), out, 100, BLOCK=64)


def cases() -> list[tuple[str, Callable[[], object]]]:
    return [("params_kernel", _scale)]


@triton.jit
def _odd_block_kernel(x, out, BLOCK: tl.constexpr):
    # Triton's blocks are powers of two: neither the interpreter nor the
    # compiler can run this kernel for BLOCK = 100.
    i = tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i) * 2)


def odd_block(x: torch.Tensor) -> torch.Tensor:
    """Launch :func:`_odd_block_kernel` on ``x (100,)``; raises (a kernel that cannot launch)."""
    out = torch.empty_like(x)
    _odd_block_kernel[(1,)](x, out, BLOCK=100)
    return out
