"""The dense parts of a model, and running them with static shapes.

A compiled backend replaces the ``forward`` of a few submodules (the
*dense parts*: backbone + FPN, RPN head, box and mask heads) and leaves the
rest of the model (anchors, proposals, NMS, RoIAlign, mask paste: the
post-processing) in eager PyTorch. The module tree and its state dict stay as
they are, so weights load the same way with or without a backend.

Two kinds of part:

* ``image``: the first dimension of every input and output is the batch of
  images (backbone, RPN head). Compiled backends see one fixed batch size:
  inputs are padded with zero images up to it and outputs sliced back (or a
  larger batch is run in chunks).
* ``roi``: the first dimension counts regions of interest (box and mask
  heads), which varies from batch to batch. Inductor pads it up to a power
  of two (a handful of static shapes); AOTInductor exports it dynamic.

A model may say which parts it has with ``model.dense_parts() -> list[(path,
kind)]``; otherwise the torchvision layout of Mask R-CNN is looked up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
import torch.utils._pytree as pytree
from torch import Tensor, nn

__all__ = [
    "DensePart",
    "StaticRunner",
    "dense_parts",
    "install",
    "next_bucket",
    "select_parts",
    "uninstall",
]

Kind = Literal["image", "roi"]

# Submodules of Mask R-CNN in torchvision's layout (our models keep it).
_MASKRCNN_PARTS: tuple[tuple[str, Kind], ...] = (
    ("backbone", "image"),
    ("rpn.head", "image"),
    ("roi_heads.box_head", "roi"),
    ("roi_heads.box_predictor", "roi"),
    ("roi_heads.mask_head", "roi"),
    ("roi_heads.mask_predictor", "roi"),
)


@dataclasses.dataclass(frozen=True)
class DensePart:
    """A submodule that a backend compiles: its dotted ``path`` and ``kind``."""

    path: str
    kind: Kind
    module: nn.Module

    @property
    def name(self) -> str:
        """The path with ``_`` for ``.`` (a name for files and package entries)."""
        return self.path.replace(".", "_")


def dense_parts(model: nn.Module) -> list[DensePart]:
    """The dense submodules of ``model``, in the order a forward pass runs them."""
    declared = getattr(model, "dense_parts", None)
    table: Sequence[tuple[str, Kind]] = declared() if callable(declared) else _MASKRCNN_PARTS
    parts = []
    for path, kind in table:
        module = _get(model, path)
        if module is not None:
            parts.append(DensePart(path=path, kind=kind, module=module))
    if not parts:
        raise ValueError(
            f"{type(model).__name__} has none of the submodules a compiled backend compiles "
            f"({', '.join(p for p, _ in table)}); use backend: eager"
        )
    return parts


def select_parts(available: list[DensePart], paths: Sequence[str] | None) -> list[DensePart]:
    """The parts named in ``paths`` (all when ``None``), in forward order."""
    if paths is None:
        return available
    known = [p.path for p in available]
    unknown = [p for p in paths if p not in known]
    if unknown or not paths:
        raise ValueError(
            f"unknown dense part(s) {', '.join(unknown) or '(none given)'}; "
            f"valid: {', '.join(known)}"
        )
    return [p for p in available if p.path in paths]


def _get(model: nn.Module, path: str) -> nn.Module | None:
    module: Any = model
    for name in path.split("."):
        module = getattr(module, name, None)
        if not isinstance(module, nn.Module):
            return None
    return module


def next_bucket(n: int, smallest: int = 8) -> int:
    """The power of two ``>= n`` (at least ``smallest``): the static RoI counts."""
    size = smallest
    while size < n:
        size *= 2
    return size


class StaticRunner:
    """Calls ``fn`` with the first dimension of every tensor padded to a static size.

    Args:
        fn: the compiled callable (same signature and outputs as the part's
            ``forward``).
        fallback: the eager ``forward``, used for empty inputs.
        target: maps the real first-dimension size ``n`` to the static size
            to pad to (``None``: call ``fn`` as it is).
        chunk: when set, inputs larger than it run in chunks of this size.
        layout: the memory format each tensor is made dense in, once padded
            (default :func:`rows_layout`; an AOT package gives its export's).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        fallback: Callable[..., Any],
        target: Callable[[int], int | None],
        chunk: int | None = None,
        layout: Callable[[Tensor], torch.memory_format] | None = None,
    ) -> None:
        self.fn = fn
        self.fallback = fallback
        self.target = target
        self.chunk = chunk
        self.layout = layout or rows_layout

    def __call__(self, *args: Any) -> Any:
        leaves, spec = pytree.tree_flatten(args)
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        n = int(tensors[0].shape[0]) if tensors else 0
        if n == 0:
            return self.fallback(*args)
        if self.chunk is not None and n > self.chunk:
            parts = [
                self._run_padded(leaves, spec, start, min(start + self.chunk, n))
                for start in range(0, n, self.chunk)
            ]
            return pytree.tree_map(lambda *xs: torch.cat(xs), parts[0], *parts[1:])
        return self._run_padded(leaves, spec, 0, n)

    def _run_padded(self, leaves: list[Any], spec: Any, start: int, stop: int) -> Any:
        n = stop - start
        size = self.target(n)
        padded = [
            _dense_padded(x[start:stop], size, self.layout(x)) if isinstance(x, Tensor) else x
            for x in leaves
        ]
        out = self.fn(*pytree.tree_unflatten(padded, spec))
        if size is None or size == n:
            return out
        return pytree.tree_map(lambda t: t[:n] if isinstance(t, Tensor) else t, out)


def rows_layout(x: Tensor) -> torch.memory_format:
    """The dense layout ``x``'s rows have: channels-last when a 4-d row is laid
    out so (and not also contiguous), else contiguous. Judged on one row, so a
    batch and its padded or sliced versions get the same answer."""
    row = x[:1]
    if (
        x.dim() == 4
        and not row.is_contiguous()
        and row.is_contiguous(memory_format=torch.channels_last)
    ):
        return torch.channels_last
    return torch.contiguous_format


def _dense_padded(x: Tensor, size: int | None, layout: torch.memory_format) -> Tensor:
    """``x`` padded with zero rows to ``size`` (``None``: as it is), dense in
    ``layout`` (no copy when it is so already).

    A part's natural output may be a strided view (transformers' pixel decoder
    returns slices of one buffer) while a padded batch is a fresh tensor;
    compiled code guards on strides, so without one layout for both the first
    padded batch would compile the part a second time (:func:`rows_layout`
    gives both one layout).
    """
    if size is not None and size != x.shape[0]:
        if size < x.shape[0]:
            raise ValueError(f"cannot pad {x.shape[0]} rows down to {size}")
        x = torch.cat([x, x.new_zeros((size - x.shape[0], *x.shape[1:]))])
    return x.contiguous(memory_format=layout)


def install(part: DensePart, runner: Callable[..., Any]) -> None:
    """Make ``runner`` the part's ``forward`` (the module and its weights stay)."""
    part.module.forward = runner


def uninstall(part: DensePart) -> None:
    """Give the part its own ``forward`` back."""
    if "forward" in part.module.__dict__:
        del part.module.__dict__["forward"]
