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
