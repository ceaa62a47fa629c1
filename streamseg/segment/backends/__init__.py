"""How the dense parts of a model run: ``eager``, ``inductor``, ``aot``, ``tensorrt``.

A backend is built once per :class:`streamseg.segment.Segmenter` around its
(eval-mode) model. It may replace the ``forward`` of the model's dense parts
(:mod:`streamseg.segment.dense`); post-processing always stays eager.

* ``eager``: plain PyTorch.
* ``inductor``: ``torch.compile`` of each dense part with static shapes,
  compiled on first use of each shape.
* ``aot``: an AOTInductor package written by ``streamseg export``, loaded
  without compiling (``aot_package=``).
* ``tensorrt``: Torch-TensorRT (NVIDIA GPUs; ``pip install 'streamseg[tensorrt]'``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from streamseg.segment.backends.base import Backend, EagerBackend

__all__ = ["BACKENDS", "Backend", "EagerBackend", "build_backend"]

BACKENDS = ("eager", "inductor", "aot", "tensorrt")


def build_backend(
    name: str,
    model: nn.Module,
    *,
    arch: str,
    device: torch.device,
    precision: str,
    channels_last: bool,
    options: dict[str, Any],
) -> Backend:
    """The backend ``name`` around ``model`` (already on ``device``, eval mode).

    ``options``: backend-specific settings: ``aot_package`` (``aot``),
    ``compiled_parts`` (``inductor``/``tensorrt``: dense-part paths, default all).
    """
    if name == "eager":
        return EagerBackend()
    if name == "inductor":
        from streamseg.segment.backends.inductor import InductorBackend

        return InductorBackend(model, device=device, parts=options.get("compiled_parts"))
    if name == "aot":
        from streamseg.segment.backends.aot import AotBackend

        return AotBackend(
            model,
            package=options.get("aot_package"),
            arch=arch,
            device=device,
            precision=precision,
            channels_last=channels_last,
        )
    if name == "tensorrt":
        from streamseg.segment.backends.tensorrt import TensorRTBackend

        return TensorRTBackend(
            model, device=device, precision=precision, parts=options.get("compiled_parts")
        )
    raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
