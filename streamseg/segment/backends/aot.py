"""``backend: aot``: AOTInductor packages of the dense parts, compiled ahead of time.

``streamseg export`` (:func:`export_package`) runs the model once on a
batch of the target size, records the inputs of each dense part, exports
each part with ``torch.export`` and compiles it with AOTInductor into one
``.pt2`` file (one entry per part, named after its path). Image parts have a
static shape ``(batch, 3, H, W)``; RoI parts a dynamic first dimension.

At run time :class:`AotBackend` loads the package (no compiling), checks that
it was made for this arch, device, precision and memory format, and loads the
Segmenter's own weights into it (``load_constants``), so a hot swap needs no
new package.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.models import InputSpec
from streamseg.segment import dense
from streamseg.segment.backends import BackendError
from streamseg.segment.backends.base import Backend
from streamseg.segment.precision import autocast
from streamseg.segment.preprocess import padded_size, resized_size

__all__ = [
    "AotBackend",
    "PackageInfo",
    "build",
    "dense_layout",
    "export_package",
    "read_package_info",
]

log = logging.getLogger("streamseg.segment")

FORMAT = "streamseg-aot-1"
_EXAMPLE_ROIS = 16
_EXPORT_HINT = (
    "write one with `streamseg export --arch A --weights W --size HxW --batch N --out F.pt2`"
)


def _package_error(message: str) -> BackendError:
    """A package that does not fit (missing, unreadable, made for another set-up)."""
    return BackendError(message, field="model.aot_package")


class PackageInfo(dict[str, Any]):
    """What a package was made for (its AOTInductor metadata, decoded)."""

    @property
    def input_size(self) -> tuple[int, int]:
        return (int(self["input_height"]), int(self["input_width"]))


class _Autocast(nn.Module):
    """Runs ``inner`` under autocast, so the precision is part of the exported graph."""

    def __init__(self, inner: nn.Module, device_type: str, precision: str) -> None:
        super().__init__()
        self.inner = inner
        self.device_type = device_type
        self.precision = precision

    def forward(self, *args: Any) -> Any:
        with autocast(self.device_type, self.precision):
            return self.inner(*args)


def export_package(
    model: nn.Module,
    *,
    arch: str,
    frame_size: tuple[int, int],
    batch: int,
    out: str | Path,
    precision: str = "fp32",
    channels_last: bool = False,
    parts: Sequence[str] | None = None,
) -> PackageInfo:
    """Compile ``model``'s dense parts into the AOTInductor package ``out``.

    Args:
        model: eval mode, on the target device. Its score threshold should
            be low enough that the example batch reaches the mask head
            (``streamseg export`` builds it with ``score_threshold=0``).
        frame_size: ``(H, W)`` of the camera frames; the package's input is
            their resized and padded size.
        batch: the static number of images per forward pass.
        parts: paths of the dense parts to compile (default: all); the others
            stay eager at run time.

    Returns:
        the package metadata.
    """
    device = next(model.parameters()).device
    spec: InputSpec = model.input_spec  # type: ignore[assignment]
    image_size = resized_size(*frame_size, spec.min_size, spec.max_size)
    input_size = padded_size([image_size], spec.size_divisibility)
    chosen = dense.select_parts(dense.dense_parts(model), parts)
    examples = _record_inputs(model, chosen, batch, image_size, input_size, channels_last)
    info = PackageInfo(
        format=FORMAT,
        arch=arch,
        batch=batch,
        frame_height=frame_size[0],
        frame_width=frame_size[1],
        input_height=input_size[0],
        input_width=input_size[1],
        precision=precision,
        device=device.type,
        channels_last=channels_last,
        style=getattr(model, "style", None),
        parts=[[p.path, p.kind] for p in chosen],
        torch=torch.__version__,
    )
    metadata = {"streamseg": json.dumps(info)}
    files: dict[str, Any] = {}
    for part in chosen:
        log.info("export: compiling %s", part.path)
        files[part.name] = _compile_part(
            part, examples[part.path], device, precision, channels_last, metadata
        )
    from torch._inductor.package import package_aoti

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    package_aoti(str(out), files)
    return info


def _record_inputs(
    model: nn.Module,
    parts: list[dense.DensePart],
    batch: int,
    image_size: tuple[int, int],
    input_size: tuple[int, int],
    channels_last: bool,
) -> dict[str, tuple[Any, ...]]:
    """Run the model once on random images; the inputs each dense part saw."""
    device = next(model.parameters()).device
    seen: dict[str, tuple[Any, ...]] = {}
    handles = []
    for part in parts:

        def hook(module: nn.Module, args: tuple[Any, ...], path: str = part.path) -> None:
            seen.setdefault(path, args)

        handles.append(part.module.register_forward_pre_hook(hook))
    generator = torch.Generator().manual_seed(0)
    images = torch.zeros((batch, 3, *input_size))
    images[:, :, : image_size[0], : image_size[1]] = torch.randn(
        (batch, 3, *image_size), generator=generator
    )
    images = images.to(device)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    try:
        with torch.no_grad():
            model(images, [image_size] * batch)
    finally:
        for handle in handles:
            handle.remove()
    missing = [p.path for p in parts if p.path not in seen]
    if missing:
        raise RuntimeError(
            f"export: {', '.join(missing)} did not run on the example batch "
            "(no detections?); build the model with score_threshold=0"
        )
    return seen


def dense_layout(args: Any, channels_last: bool) -> Any:
    """``args`` with every tensor dense in one fixed layout: 4-d ones channels-last
    when ``channels_last``, all others contiguous (a no-op for tensors already so).

    A compiled package assumes the strides of its export example without
    checking them, so the same values laid out otherwise (a slice of a larger
    buffer, as transformers' pixel decoder returns; another compiled part's
    output) would be read wrongly. Export and run time both lay inputs out
    with this.
    """
    import torch.utils._pytree as pytree

    def dense(t: Any) -> Any:
        if not isinstance(t, Tensor):
            return t
        layout = torch.channels_last if channels_last and t.dim() == 4 else torch.contiguous_format
        return t.contiguous(memory_format=layout)

    return pytree.tree_map(dense, args)


def _compile_part(
    part: dense.DensePart,
    args: tuple[Any, ...],
    device: torch.device,
    precision: str,
    channels_last: bool,
    metadata: dict[str, str],
) -> Any:
    import torch.utils._pytree as pytree
    from torch.export import Dim

    dynamic: Any = None
    if part.kind == "roi":
        # A fresh random batch of RoIs (the recorded count may be 0, 1 or anything).
        args = pytree.tree_map(
            lambda t: (
                torch.randn((_EXAMPLE_ROIS, *t.shape[1:]), device=t.device, dtype=t.dtype)
                if isinstance(t, Tensor)
                else t
            ),
            args,
        )
        rois = Dim("rois", min=2)
        dynamic = pytree.tree_map(lambda t: {0: rois} if isinstance(t, Tensor) else None, args)
    args = dense_layout(args, channels_last)
    module = part.module if precision == "fp32" else _Autocast(part.module, device.type, precision)
    with torch.no_grad():
        ep = torch.export.export(module, tuple(args), dynamic_shapes=dynamic, strict=False)
        options = {
            "aot_inductor.package": True,
            "aot_inductor.metadata": metadata,
            # Small weights (e.g. a 5-class bias) would be inlined into the code, where
            # load_constants cannot replace them: keep every weight a constant.
            "always_keep_tensor_constants": True,
        }
        graph = ep.module(check_guards=False)
        return torch._inductor.aot_compile(graph, tuple(args), options=options)  # type: ignore[arg-type]


def read_package_info(path: str | Path, first_part: str) -> tuple[PackageInfo, Any]:
    """The metadata of package ``path`` and its runner for ``first_part``."""
    from torch._inductor.package import load_package

    try:
        runner = load_package(str(path), model_name=first_part)
        raw = runner.get_metadata().get("streamseg")
    except Exception as exc:  # unreadable zip, missing entry, wrong torch, ...
        raise _package_error(
            f"aot_package {path} could not be loaded ({_first_line(exc)}); {_EXPORT_HINT}"
        ) from None
    if raw is None:
        raise _package_error(
            f"aot_package {path} was not written by `streamseg export`; {_EXPORT_HINT}"
        )
    return PackageInfo(json.loads(raw)), runner


def _first_part(package: str, available: list[dense.DensePart]) -> str:
    """The name of one part the package holds (packages list theirs in the archive)."""
    import zipfile

    try:
        with zipfile.ZipFile(package) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise _package_error(
            f"aot_package {package} is not a .pt2 archive ({exc}); {_EXPORT_HINT}"
        ) from None
    for part in available:
        if any(f"/aotinductor/{part.name}/" in name for name in names):
            return part.name
    raise _package_error(f"aot_package {package} holds no part of this model; {_EXPORT_HINT}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
            raise _package_error(
                f"backend 'aot' needs model.aot_package (a .pt2 file); {_EXPORT_HINT}"
            )
        if not Path(package).is_file():
            raise _package_error(f"aot_package {package} does not exist; {_EXPORT_HINT}")
        available = dense.dense_parts(model)
        self.info, first = read_package_info(package, _first_part(package, available))
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
            runner = _in_export_layout(self.runners[part.name], channels_last)
            if part.kind == "image":
                static = dense.StaticRunner(
                    runner, fallback=eager, target=lambda n: batch, chunk=batch
                )
            else:
                static = dense.StaticRunner(runner, fallback=eager, target=lambda n: max(n, 2))
            dense.install(part, static)
        log.info("aot: %s (%s)", self.package, _describe(self.info))

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
            raise _package_error(
                f"aot_package {self.package} was exported for another set-up ({'; '.join(wrong)}); "
                f"export it again with these settings: {_EXPORT_HINT}"
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


def _in_export_layout(runner: Any, channels_last: bool) -> Any:
    """``runner`` with its inputs laid out as at export (:func:`dense_layout`)."""

    def run(*args: Any) -> Any:
        return runner(*dense_layout(args, channels_last))

    return run


def _tensors(module: nn.Module) -> dict[str, Tensor]:
    """Parameters and buffers (persistent or not) of ``module`` by their names in it."""
    named: dict[str, Tensor] = dict(module.named_buffers())
    named.update((name, p.detach()) for name, p in module.named_parameters())
    return named


def _describe(info: PackageInfo) -> str:
    return (
        f"{info['arch']}, batch {info['batch']}, input {info['input_height']}x"
        f"{info['input_width']}, {info['precision']}, {info['device']}"
    )
