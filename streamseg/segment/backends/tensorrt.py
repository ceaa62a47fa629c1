"""``backend: tensorrt``: the dense parts through Torch-TensorRT (NVIDIA GPUs only).

Uses Torch-TensorRT's ``torch.compile`` backend with the same static-shape
scheme as ``inductor`` (one batch size, one input size, power-of-two RoI
counts), with ``enabled_precisions`` from ``precision``. TensorRT engines hold
their weights, so a hot swap rebuilds them (on the next batch of each shape).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.models import precision_dtype
from streamseg.segment.backends import BackendError
from streamseg.segment.backends.inductor import InductorBackend

__all__ = ["TensorRTBackend", "build", "tensorrt_problems"]


def build(
    model: nn.Module, *, device: torch.device, precision: str, options: dict[str, Any], **_: Any
) -> TensorRTBackend:
    """The ``tensorrt`` entry of the backend registry."""
    return TensorRTBackend(
        model, device=device, precision=precision, parts=options.get("compiled_parts")
    )


def tensorrt_problems(device: torch.device) -> list[str]:
    """Why Torch-TensorRT cannot run here (empty when it can)."""
    problems = []
    if device.type != "cuda":
        problems.append(
            f"it runs only on NVIDIA GPUs, and model.device is {str(device)!r}: set device: cuda "
            "(or use backend: inductor or aot on a CPU)"
        )
    elif not torch.cuda.is_available():
        problems.append(
            f"torch {torch.__version__} sees no CUDA GPU: run on a machine with an NVIDIA GPU and "
            "a CUDA build of torch (or use backend: inductor or aot)"
        )
    if importlib.util.find_spec("torch_tensorrt") is None:
        problems.append(
            "Torch-TensorRT is not installed: pip install 'streamseg[tensorrt]' "
            "(a torch-tensorrt release built for this torch version)"
        )
    return problems


class TensorRTBackend(InductorBackend):
    """Torch-TensorRT engines for the dense parts (see the module docstring)."""

    name = "tensorrt"

    def __init__(
        self,
        model: nn.Module,
        *,
        device: torch.device,
        precision: str,
        parts: Sequence[str] | None = None,
    ) -> None:
        problems = tensorrt_problems(device)
        if problems:
            raise BackendError(
                "backend 'tensorrt' cannot run: " + "; ".join(problems), field="model.backend"
            )
        import torch_tensorrt  # noqa: F401  (registers the "tensorrt" torch.compile backend)

        self.precision = precision
        super().__init__(model, device=device, parts=parts)

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        options: dict[str, Any] = {
            "enabled_precisions": {precision_dtype(self.precision)},
            "min_block_size": 1,
            "device": self.device,
        }
        return torch.compile(fn, backend="tensorrt", dynamic=False, options=options)

    def weights_loaded(self, state: Mapping[str, Tensor]) -> None:
        torch._dynamo.reset()
        self._install()
