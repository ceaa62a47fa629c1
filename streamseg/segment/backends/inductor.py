"""``backend: inductor``: ``torch.compile`` of the dense parts with static shapes.

Each dense part (backbone + FPN, RPN head, box and mask heads) gets its own
``torch.compile(..., dynamic=False)``; anchors, proposals, NMS, RoIAlign and
mask paste stay eager. Shapes are kept few and static:

* images: the batch is padded to the largest batch seen so far and the
  spatial size to the largest padded size seen so far, so a pipeline with
  fixed cameras settles on one shape after its first full batch;
* RoIs: padded up to a power of two (8, 16, ..., 1024, ...).

``compiled_parts`` (a Segmenter option) limits compilation to some parts,
e.g. ``("backbone",)``: less to compile, the rest eager.

Each new shape compiles once (tens of seconds on a small CPU, logged).
Weights are not frozen into the compiled code (parameters stay inputs), so
a hot swap that copies new weights in place needs no recompilation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from streamseg.segment import dense
from streamseg.segment.backends.base import Backend

__all__ = ["InductorBackend", "build"]

log = logging.getLogger("streamseg.segment")

# Distinct static shapes one part may compile for (RoI buckets, batch sizes).
_RECOMPILE_LIMIT = 64


def build(
    model: nn.Module, *, device: torch.device, options: dict[str, Any], **_: Any
) -> InductorBackend:
    """The ``inductor`` entry of the backend registry."""
    return InductorBackend(model, device=device, parts=options.get("compiled_parts"))


class _GrowingTarget:
    """Pads to the largest size seen so far (``None`` when nothing needs padding)."""

    def __init__(self) -> None:
        self.largest = 0

    def __call__(self, n: int) -> int:
        self.largest = max(self.largest, n)
        return self.largest


class InductorBackend(Backend):
    """Compiles the model's dense parts in place (see the module docstring)."""

    name = "inductor"

    def __init__(
        self, model: nn.Module, *, device: torch.device, parts: Sequence[str] | None = None
    ) -> None:
        self.parts = dense.select_parts(dense.dense_parts(model), parts)
        self.device = device
        self._size = (0, 0)
        _raise_recompile_limit()
        self._install()
        log.info(
            "%s: compiling %s on first use of each shape",
            self.name,
            ", ".join(p.path for p in self.parts),
        )

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """The compiled version of one part's eager ``forward``."""
        return torch.compile(fn, dynamic=False)

    def _install(self) -> None:
        images = _GrowingTarget()  # one batch size for every image part
        for part in self.parts:
            eager = type(part.module).forward.__get__(part.module)
            target: Any = images if part.kind == "image" else dense.next_bucket
            runner = dense.StaticRunner(self.compile(eager), fallback=eager, target=target)
            dense.install(part, runner)

    def input_size(self, padded: tuple[int, int]) -> tuple[int, int]:
        self._size = (max(self._size[0], padded[0]), max(self._size[1], padded[1]))
        return self._size

    def close(self) -> None:
        for part in self.parts:
            dense.uninstall(part)


def _raise_recompile_limit() -> None:
    import torch._dynamo.config as dynamo_config

    if dynamo_config.recompile_limit < _RECOMPILE_LIMIT:
        dynamo_config.recompile_limit = _RECOMPILE_LIMIT
