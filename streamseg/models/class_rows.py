"""Changing a model's classes without forgetting the ones it keeps.

Some layers have rows per class: Mask R-CNN's class logits, box deltas (4
rows per class) and mask logits; Mask2Former's class head and its loss
weights, whose last row is "no object". Each family names them
(:attr:`streamseg.models.Family.class_layers`). When a fine-tune's classes
differ from its checkpoint's, :func:`remap_class_rows` rebuilds those
tensors for the new class list, matching classes by name: a kept class
keeps its rows (wherever it now stands), a new class keeps the new model's
initial rows, and a dropped class's rows are left out.

Example:
    >>> import torch
    >>> from streamseg.models import build_model, class_options
    >>> old = build_model("maskrcnn_small", **class_options("maskrcnn_small", ("__background__", "a", "b")))
    >>> new = build_model("maskrcnn_small", **class_options("maskrcnn_small", ("__background__", "b", "c")))
    >>> state, change = remap_class_rows(
    ...     "maskrcnn_small", old.state_dict(), old.class_names, new.state_dict(), new.class_names)
    >>> change.kept, change.added, change.dropped
    (('b',), ('c',), ('a',))
    >>> key = "roi_heads.box_predictor.cls_score.weight"
    >>> bool(torch.equal(state[key][1], old.state_dict()[key][2]))  # b moved from row 2 to 1
    True
"""  # noqa: E501

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from torch import Tensor

from streamseg.models import FAMILIES, arch_family

__all__ = ["NO_OBJECT", "ClassChange", "class_slots", "remap_class_rows"]

# The slot name of Mask2Former's "no object" row (not a class anyone can name).
NO_OBJECT = "<no object>"
_BACKGROUND = "__background__"


@dataclasses.dataclass(frozen=True)
class ClassChange:
    """How a fine-tune's classes differ from its checkpoint's (background left out).

    Attributes:
        kept: classes in both (in the new order), whose rows were kept.
        added: new classes, whose rows keep the new model's initialisation.
        dropped: the checkpoint's classes the new model lacks; their rows
            are gone.
        layers: the state-dict keys whose rows were remapped.
    """

    kept: tuple[str, ...]
    added: tuple[str, ...]
    dropped: tuple[str, ...]
    layers: tuple[str, ...] = ()

    def describe(self) -> list[str]:
        """Log lines: which classes were kept, added and dropped, and where."""
        if not self.layers:
            return []
        lines = [
            f"classes kept ({len(self.kept)}): {_names(self.kept)}; "
            f"added ({len(self.added)}): {_names(self.added)}; "
            f"dropped ({len(self.dropped)}): {_names(self.dropped)}"
        ]
        lines.append(
            f"class rows remapped by name in {len(self.layers)} tensors (new classes keep "
            "their initialisation): " + ", ".join(self.layers)
        )
        return lines


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def class_slots(arch: str, class_names: Sequence[str]) -> tuple[str, ...]:
    """The class each row group of ``arch``'s class layers stands for, in order.

    ``class_names`` starts with ``__background__``. Families that count the
    background (Mask R-CNN) have a row for it first; the others
    (Mask2Former) have a "no object" row (:data:`NO_OBJECT`) last.
    """
    if FAMILIES[arch_family(arch)].counts_background:
        return tuple(class_names)
    return (*class_names[1:], NO_OBJECT)


def remap_class_rows(
    arch: str,
    source: Mapping[str, Tensor],
    source_names: Sequence[str],
    target: Mapping[str, Tensor],
    target_names: Sequence[str],
) -> tuple[dict[str, Tensor], ClassChange]:
    """``source`` with its class layers laid out for ``target_names``.

    Args:
        arch: the architecture of both state dicts.
        source: the checkpoint's state dict (not modified).
        source_names: its classes, ``__background__`` first (duplicates,
            such as torchvision's ``N/A`` slots, match by their first row).
        target: the new model's state dict, whose class-layer rows are the
            initialisation of the new classes.
        target_names: the new model's classes, ``__background__`` first.

    Returns:
        a copy of ``source`` whose class-layer tensors have the target's
        shape (kept classes' rows from ``source``, the others from
        ``target``), and the :class:`ClassChange`. A class layer whose rows
        do not divide by its class count on either side is left as it is
        (the shape check of the caller reports it).
    """
    old_slots = class_slots(arch, source_names)
    new_slots = class_slots(arch, target_names)
    first_row: dict[str, int] = {}
    for i, name in enumerate(old_slots):
        first_row.setdefault(name, i)
    prefixes = FAMILIES[arch_family(arch)].class_layers
    out = dict(source)
    layers = []
    for key, init in target.items():
        if not key.startswith(prefixes) or key not in source:
            continue
        rows = _rows_per_slot(source[key], init, len(old_slots), len(new_slots))
        if rows is None:
            continue
        if list(old_slots) == list(new_slots):
            continue
        old = source[key].reshape(len(old_slots), rows, *source[key].shape[1:])
        new = init.detach().clone().reshape(len(new_slots), rows, *init.shape[1:])
        for j, name in enumerate(new_slots):
            if name in first_row:
                new[j] = old[first_row[name]].to(new.dtype)
        out[key] = new.reshape(init.shape)
        layers.append(key)
    # torchvision's COCO table names its unused slots "N/A": no class to drop.
    real_old = [n for n in dict.fromkeys(source_names[1:]) if n != "N/A"]
    change = ClassChange(
        kept=tuple(n for n in target_names[1:] if n in first_row),
        added=tuple(n for n in target_names[1:] if n not in first_row),
        dropped=tuple(n for n in real_old if n not in set(target_names)),
        layers=tuple(layers),
    )
    return out, change


def _rows_per_slot(old: Tensor, new: Tensor, old_slots: int, new_slots: int) -> int | None:
    if old.dim() == 0 or new.dim() == 0 or old.shape[1:] != new.shape[1:]:
        return None
    if old.shape[0] % old_slots or new.shape[0] % new_slots:
        return None
    rows = new.shape[0] // new_slots
    return rows if old.shape[0] // old_slots == rows else None
