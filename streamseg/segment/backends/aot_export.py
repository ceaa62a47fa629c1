"""``streamseg export``: the dense parts of a model compiled ahead of time into one package.

:func:`export_package` runs the model once on a batch of the target size,
records the inputs of each dense part, exports each part with
``torch.export`` and compiles it with AOTInductor into one ``.pt2`` file.
Image parts have a static shape ``(batch, 3, H, W)``; RoI parts a dynamic
first dimension.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.models import InputSpec
from streamseg.segment import dense
from streamseg.segment.backends.aot_package import FORMAT, PackageInfo, dense_layout
from streamseg.segment.precision import autocast
from streamseg.segment.preprocess import padded_size, resized_size

__all__ = ["export_package"]

log = logging.getLogger("streamseg.segment")


_EXAMPLE_ROIS = 16


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
    spec = model.input_spec
    assert isinstance(spec, InputSpec), type(spec)
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
        return torch._inductor.aot_compile(graph, tuple(args), options=options)
