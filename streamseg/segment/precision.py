"""Precision names and the one autocast helper (serving, AOT export, eval, training).

``fp32`` runs as is; ``bf16`` and ``fp16`` run the model under
``torch.autocast`` with that dtype (weights stay ``float32``). The
Segmenter, the AOT export wrapper, evaluation and the trainer's forward pass
all enter autocast through :func:`autocast`, so a precision means the same
thing wherever it is named. It lives in ``segment`` because ``train`` may
import ``segment`` (never the other way round).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

__all__ = ["PRECISIONS", "autocast"]

PRECISIONS: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` on ``device``'s type for ``bf16``/``fp16``; a no-op for ``fp32``.

    Raises:
        ValueError: ``precision`` is not one of :data:`PRECISIONS`.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=PRECISIONS[precision])
