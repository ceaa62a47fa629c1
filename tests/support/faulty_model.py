"""``maskrcnn_small_faulty``: ``maskrcnn_small`` that fails on chosen forward passes.

A test-only architecture: ``tests/support/plugins.py`` adds its row to
``streamseg.models.ARCHITECTURES``, so that the suite has it and a user's
``--arch`` choices do not.

A real model (the same weights, keys and outputs as ``maskrcnn_small``)
for testing how the service lives with a model that fails: an exception
at warm-up or on a batch, a process that dies, a forward pass that never
ends. Not for real use. The failures come from the build option
``faults``, which a checkpoint's meta carries (``model_options``), so the
model's own process (``runtime.model_process``) builds the same faults.

``faults`` is a comma-separated list of ``WHEN=WHAT``:

* ``WHEN``: the forward pass's index in this model's life, counting from 0
  (``serve`` runs pass 0 as its warm-up), or ``N+`` for pass ``N`` and
  every one after it;
* ``WHAT``: ``raise`` (a ``RuntimeError`` naming the pass), ``exit`` (the
  process ends at once with exit code 70, as a crash would end it) or
  ``hang`` (the pass sleeps for an hour).

Example: ``faults="3=raise,5+=exit"``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from typing import Any

from torch import Tensor

from streamseg.models.maskrcnn.build import SMALL_SPEC, build
from streamseg.models.maskrcnn.model import MaskRCNN

__all__ = ["FAULT_KINDS", "FaultyMaskRCNN", "maskrcnn_small_faulty", "parse_faults"]

FAULT_KINDS = ("raise", "exit", "hang")
EXIT_CODE = 70  # what the process ends with on an ``exit`` fault


@dataclasses.dataclass(frozen=True)
class Faults:
    """Forward pass index -> fault, and the fault of every pass from ``since`` on."""

    at: dict[int, str] = dataclasses.field(default_factory=dict)
    since: int | None = None
    since_kind: str = "raise"

    def fault(self, index: int) -> str | None:
        if index in self.at:
            return self.at[index]
        return self.since_kind if self.since is not None and index >= self.since else None


def parse_faults(spec: str) -> Faults:
    """``"3=raise,5+=exit"`` -> :class:`Faults`; ``ValueError`` naming a bad item."""
    at: dict[int, str] = {}
    since, since_kind = None, "raise"
    for item in filter(None, (part.strip() for part in spec.split(","))):
        when, _, what = item.partition("=")
        every = when.endswith("+")
        index = when.removesuffix("+")
        if not index.isdigit() or what not in FAULT_KINDS:
            raise ValueError(
                f"faults item {item!r} must look like N=KIND or N+=KIND with KIND one of "
                f"{', '.join(FAULT_KINDS)}"
            )
        if every:
            since, since_kind = int(index), what
        else:
            at[int(index)] = what
    return Faults(at, since, since_kind)


class FaultyMaskRCNN(MaskRCNN):
    """A ``MaskRCNN`` whose forward passes fail as ``faults`` says (eval mode only)."""

    faults: Faults
    passes: int

    def forward(
        self,
        images: Tensor,
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]] | None = None,
    ) -> Any:
        index, self.passes = self.passes, self.passes + 1
        kind = None if self.training else self.faults.fault(index)
        if kind == "raise":
            raise RuntimeError(f"maskrcnn_small_faulty: fault injected on forward pass {index}")
        if kind == "exit":
            os._exit(EXIT_CODE)
        if kind == "hang":
            time.sleep(3600)
        return super().forward(images, image_sizes, targets)


def maskrcnn_small_faulty(*, faults: str = "", **options: Any) -> FaultyMaskRCNN:
    """``maskrcnn_small`` with ``options`` that fails as ``faults`` says (see the module)."""
    plan = parse_faults(faults)
    model = build(dataclasses.replace(SMALL_SPEC, name="maskrcnn_small_faulty"), **options)
    # The same module tree (so the same state dict keys and weights), with
    # the forward pass that counts and fails.
    model.__class__ = FaultyMaskRCNN
    faulty: FaultyMaskRCNN = model  # type: ignore[assignment]
    faulty.faults, faulty.passes = plan, 0
    return faulty
