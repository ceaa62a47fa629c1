"""An AOTInductor package as ``streamseg export`` writes it and ``backend: aot`` reads it.

One ``.pt2`` file: an entry per dense part (named after its path) and a
JSON record of what it was made for (:class:`PackageInfo`: arch, device,
precision, memory format, input size), checked before a package runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from streamseg.segment import dense
from streamseg.segment.backends import BackendError

__all__ = [
    "EXPORT_HINT",
    "FORMAT",
    "PackageInfo",
    "dense_layout",
    "export_layout",
    "first_part",
    "package_error",
    "read_package_info",
]


FORMAT = "streamseg-aot-1"


EXPORT_HINT = (
    "write one with `streamseg export --arch A --weights W --size HxW --batch N --out F.pt2`"
)


def package_error(message: str) -> BackendError:
    """A package that does not fit (missing, unreadable, made for another set-up)."""
    return BackendError(message, field="model.aot_package")


class PackageInfo(dict[str, Any]):
    """What a package was made for (its AOTInductor metadata, decoded)."""

    @property
    def input_size(self) -> tuple[int, int]:
        return (int(self["input_height"]), int(self["input_width"]))


def dense_layout(args: Any, channels_last: bool) -> Any:
    """``args`` with every tensor dense in one fixed layout: 4-d ones channels-last
    when ``channels_last``, all others contiguous (a no-op for tensors already so).

    A compiled package assumes the strides of its export example without
    checking them, so the same values laid out otherwise (a slice of a larger
    buffer, as transformers' pixel decoder returns; another compiled part's
    output) would be read wrongly. The export lays its example out with this;
    at run time the backend's ``dense.StaticRunner`` pads and lays out the
    inputs by :func:`export_layout` in one step.
    """
    import torch.utils._pytree as pytree

    def dense(t: Any) -> Any:
        if not isinstance(t, Tensor):
            return t
        return t.contiguous(memory_format=export_layout(t, channels_last))

    return pytree.tree_map(dense, args)


def export_layout(t: Tensor, channels_last: bool) -> torch.memory_format:
    """The memory format :func:`dense_layout` gives ``t``."""
    return torch.channels_last if channels_last and t.dim() == 4 else torch.contiguous_format


def read_package_info(path: str | Path, first_part: str) -> tuple[PackageInfo, Any]:
    """The metadata of package ``path`` and its runner for ``first_part``."""
    from torch._inductor.package import load_package

    try:
        runner = load_package(str(path), model_name=first_part)
        raw = runner.get_metadata().get("streamseg")
    except Exception as exc:  # unreadable zip, missing entry, wrong torch, ...
        raise package_error(
            f"aot_package {path} could not be loaded ({first_line(exc)}); {EXPORT_HINT}"
        ) from None
    if raw is None:
        raise package_error(
            f"aot_package {path} was not written by `streamseg export`; {EXPORT_HINT}"
        )
    return PackageInfo(json.loads(raw)), runner


def first_part(package: str, available: list[dense.DensePart]) -> str:
    """The name of one part the package holds (packages list theirs in the archive)."""
    import zipfile

    try:
        with zipfile.ZipFile(package) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise package_error(
            f"aot_package {package} is not a .pt2 archive ({exc}); {EXPORT_HINT}"
        ) from None
    for part in available:
        if any(f"/aotinductor/{part.name}/" in name for name in names):
            return part.name
    raise package_error(f"aot_package {package} holds no part of this model; {EXPORT_HINT}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe(info: PackageInfo) -> str:
    return (
        f"{info['arch']}, batch {info['batch']}, input {info['input_height']}x"
        f"{info['input_width']}, {info['precision']}, {info['device']}"
    )
