"""The one autocast helper (serving, AOT export, eval, training).

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

from streamseg.models import PRECISIONS, precision_dtype

__all__ = ["PRECISIONS", "autocast"]


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` on ``device``'s type for ``bf16``/``fp16``; a no-op for ``fp32``.

    Raises:
        ValueError: ``precision`` is not one of ``streamseg.models.PRECISIONS``.
    """
    dtype = precision_dtype(precision)  # ValueError for an unknown name
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)
