"""Which implementation serves a tensor: the native op namespace, or the reference."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from streamseg.ops import _native

_FLOAT = (torch.float32, torch.float64)


_ANY_FLOAT = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def kernels_for(t: Tensor, dtypes: tuple[torch.dtype, ...] = _FLOAT) -> Any:
    """The native op namespace for ``t``'s device and dtype, else ``None`` (reference).

    ``torch.ops.streamseg`` (C++) serves CPU tensors, ``torch.ops.streamseg_triton``
    (Triton) CUDA tensors; both take the same arguments.
    """
    kind = "cuda" if _native.is_gpu_type(t.device.type) else t.device.type
    if t.dtype not in dtypes or not _native.enabled(kind):
        return None
    return torch.ops.streamseg_triton if kind == "cuda" else torch.ops.streamseg
