"""``backend: aot``: AOTInductor packages of the dense parts, compiled ahead of time.

``streamseg export`` writes the package (:mod:`.aot_export`; what it holds:
:mod:`.aot_package`). At run time :class:`AotBackend` loads it (no
compiling), checks that it was made for this arch, device, precision and
memory format, and loads the Segmenter's own weights into it
(``load_constants``), so a hot swap needs no new package.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.segment import dense
from streamseg.segment.backends.aot_package import (
    EXPORT_HINT,
    describe,
    export_layout,
    first_part,
    package_error,
    read_package_info,
)
from streamseg.segment.backends.base import Backend

__all__ = ["AotBackend", "build"]

log = logging.getLogger("streamseg.segment")


def build(
    model: nn.Module,
    *,
    arch: str,
    device: torch.device,
    precision: str,
    channels_last: bool,
    options: dict[str, Any],
) -> AotBackend:
    """The ``aot`` entry of the backend registry (``options["aot_package"]``: the .pt2)."""
    return AotBackend(
        model,
        package=options.get("aot_package"),
        arch=arch,
        device=device,
        precision=precision,
        channels_last=channels_last,
    )


class AotBackend(Backend):
    """Runs the dense parts from an AOTInductor package (see the module docstring)."""

    name = "aot"

    def __init__(
        self,
        model: nn.Module,
        *,
        package: str | None,
        arch: str,
        device: torch.device,
        precision: str,
        channels_last: bool,
    ) -> None:
        if not package:
            raise package_error(
                f"backend 'aot' needs model.aot_package (a .pt2 file); {EXPORT_HINT}"
            )
        if not Path(package).is_file():
            raise package_error(f"aot_package {package} does not exist; {EXPORT_HINT}")
        available = dense.dense_parts(model)
        self.info, first = read_package_info(package, first_part(package, available))
        self.package = str(package)
        self._check(
            arch, device, precision, channels_last, getattr(model, "style", None), available
        )
        packaged = {path for path, _ in self.info["parts"]}
        self.parts = [p for p in available if p.path in packaged]
        self.runners = {self.parts[0].name: first}
        from torch._inductor.package import load_package

        for part in self.parts[1:]:
            self.runners[part.name] = load_package(self.package, model_name=part.name)
        self.weights_loaded(model.state_dict())
        batch = int(self.info["batch"])
        for part in self.parts:
            eager = type(part.module).forward.__get__(part.module)
            runner = self.runners[part.name]
            # Inputs padded and laid out as at export, in one step.
            layout = functools.partial(export_layout, channels_last=channels_last)
            if part.kind == "image":
                static = dense.StaticRunner(
                    runner, fallback=eager, target=lambda n: batch, chunk=batch, layout=layout
                )
            else:
                static = dense.StaticRunner(
                    runner, fallback=eager, target=lambda n: max(n, 2), layout=layout
                )
            dense.install(part, static)
        log.info("aot: %s (%s)", self.package, describe(self.info))

    def _check(
        self,
        arch: str,
        device: torch.device,
        precision: str,
        channels_last: bool,
        style: str | None,
        available: list[dense.DensePart],
    ) -> None:
        info = dict(self.info)
        # Mask R-CNN packages written before styles existed are torchvision-style.
        info.setdefault("style", None if style is None else "torchvision")
        expected = {
            "arch": arch,
            "device": device.type,
            "precision": precision,
            "channels_last": channels_last,
            "style": style,  # the backbone's stride placement is compiled in
        }
        wrong = [
            f"{k}: package {info.get(k)!r}, model {v!r}"
            for k, v in expected.items()
            if info.get(k) != v
        ]
        model_parts = {p.path: p.kind for p in available}
        for path, kind in info.get("parts", []):
            if model_parts.get(path) != kind:
                wrong.append(f"part {path} ({kind}) is not a dense part of the model")
        if wrong:
            raise package_error(
                f"aot_package {self.package} was exported for another set-up ({'; '.join(wrong)}); "
                f"export it again with these settings: {EXPORT_HINT}"
            )

    def warm_up_frame(self, min_size: int, max_size: int) -> tuple[int, int]:
        return (int(self.info["frame_height"]), int(self.info["frame_width"]))

    def input_size(self, padded: tuple[int, int]) -> tuple[int, int]:
        size = self.info.input_size
        if padded[0] > size[0] or padded[1] > size[1]:
            raise ValueError(
                f"frames need a {padded[0]}x{padded[1]} model input but aot_package "
                f"{self.package} is fixed at {size[0]}x{size[1]} (frames up to "
                f"{self.info['frame_height']}x{self.info['frame_width']}); export it again "
                "with --size set to the largest camera resolution"
            )
        return size

    def weights_loaded(self, state: Mapping[str, Tensor]) -> None:
        # The Segmenter copies new weights into the model's tensors in place, so
        # each part's own tensors hold them. Looking them up by the part's own
        # names also covers parts whose weights the state dict keeps under
        # another path (Mask2Former's ``head``: ``model.transformer_module.*``).
        # Undotted names the module lacks (``_tensor_constant1``) are tensors its
        # forward builds from plain data (transformers' deformable attention:
        # the feature map shapes), not weights: they keep their packaged value.
        for part in self.parts:
            runner = self.runners[part.name]
            own = _tensors(part.module)
            constants, traced = {}, []
            for fqn in runner.get_constant_fqns():
                name = fqn.removeprefix("inner.")
                if name in own:
                    constants[fqn] = own[name]
                elif "." not in name:
                    traced.append(fqn)
                else:
                    raise ValueError(
                        f"aot_package {self.package}: {part.path} needs {fqn}, "
                        "which the model lacks; export the package again"
                    )
            runner.load_constants(constants, check_full_update=not traced)

    def close(self) -> None:
        for part in self.parts:
            dense.uninstall(part)
        self.runners.clear()


def _tensors(module: nn.Module) -> dict[str, Tensor]:
    """Parameters and buffers (persistent or not) of ``module`` by their names in it."""
    named: dict[str, Tensor] = dict(module.named_buffers())
    named.update((name, p.detach()) for name, p in module.named_parameters())
    return named
