"""How the dense parts of a model run: the backend registry.

A backend is built once per :class:`streamseg.segment.Segmenter` around its
(eval-mode) model. It may replace the ``forward`` of the model's dense parts
(:mod:`streamseg.segment.dense`); post-processing always stays eager.

:data:`BACKENDS` is the one list of backends: ``model.backend`` of
pipeline.yaml, its validators and the CLI's ``--backend`` choices derive from
it. Each entry names, as ``"module:function"``, the builder (imported only
when that backend is built, so importing this package imports no torch) and
the start-up check that says, before a model is built, why it cannot run
here. Adding a backend: one file with its builder, plus one line here.

* ``eager``: plain PyTorch.
* ``inductor``: ``torch.compile`` of each dense part with static shapes,
  compiled on first use of each shape.
* ``aot``: an AOTInductor package written by ``streamseg export``, loaded
  without compiling (``aot_package=``).
* ``tensorrt``: Torch-TensorRT (NVIDIA GPUs; ``pip install 'streamseg[tensorrt]'``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from streamseg.errors import StartupError
from streamseg.registry import load

if TYPE_CHECKING:
    import torch
    from torch import nn

    from streamseg.segment.backends.base import Backend

__all__ = ["BACKENDS", "BackendError", "BackendKind", "backend_problems", "build_backend"]


class BackendError(StartupError, ValueError):
    """A model that cannot run as configured, found while starting.

    ``field`` is the pipeline.yaml field to fix (``model.device``,
    ``model.backend``, ``model.aot_package``); the message says how.
    """

    default_field = "model.backend"


@dataclasses.dataclass(frozen=True)
class BackendKind:
    """One backend.

    Attributes:
        builder: ``"module:function"``; the function takes ``(model, *, arch,
            device, precision, channels_last, options)`` and returns a
            :class:`Backend`.
        problems: ``"module:function"`` taking the ``torch.device`` and
            returning why the backend cannot run there (empty: it can);
            ``None``: it runs everywhere.
        needs_cuda: runs only on ``device: cuda`` (checked by the config).
        needs_package: runs a package written ahead of time
            (``model.aot_package``, checked by the config).
    """

    builder: str
    problems: str | None = None
    needs_cuda: bool = False
    needs_package: bool = False


BACKENDS: dict[str, BackendKind] = {
    "eager": BackendKind("streamseg.segment.backends.base:build"),
    "inductor": BackendKind("streamseg.segment.backends.inductor:build"),
    "aot": BackendKind("streamseg.segment.backends.aot:build", needs_package=True),
    "tensorrt": BackendKind(
        "streamseg.segment.backends.tensorrt:build",
        problems="streamseg.segment.backends.tensorrt:tensorrt_problems",
        needs_cuda=True,
    ),
}


def _kind(name: str) -> BackendKind:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def backend_problems(name: str, device: torch.device) -> list[str]:
    """Why backend ``name`` cannot run on ``device`` here (empty when it can)."""
    kind = _kind(name)
    if kind.problems is None:
        return []
    problems: list[str] = load(kind.problems)(device)
    return problems


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
    backend: Backend = load(_kind(name).builder)(
        model,
        arch=arch,
        device=device,
        precision=precision,
        channels_last=channels_last,
        options=options,
    )
    return backend
