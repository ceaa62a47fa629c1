"""Frames to model input: resize, normalise and pad a batch of ``uint8`` images.

The one preprocessing path: ``serve`` (the Segmenter), ``eval``, ``label``
and the training batch (after augmentation, with its jittered sizes) all
call :func:`preprocess`, so a model is trained and evaluated on exactly the
input it is served. Follows the model's :class:`streamseg.models.InputSpec`:

1. each frame is resized (bilinear) so that its shorter side is ``min_size``
   unless its longer side would then pass ``max_size`` (the scale is
   ``min(min_size / short, max_size / long)``, the size ``floor(side * scale)``,
   no antialiasing: torchvision's own transform, which its weights were
   trained and evaluated with);
2. channels are reordered when the model wants ``BGR``, values divided by
   ``scale`` and normalised with ``mean``/``std``;
3. all frames are placed top-left in one zero-filled ``(B, 3, H, W)`` tensor
   (zero *after* normalisation) whose ``H``/``W`` are multiples of
   ``size_divisibility`` (or a fixed ``pad_to`` size for compiled backends).

Frames of the same size (one camera, usually) are resized in one call, so a
batch of several cameras costs one interpolation per distinct frame size.
Everything stays on the frames' device (CPU or CUDA).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from streamseg.models import InputSpec
from streamseg.ops.transfer import to_device

__all__ = ["ModelInput", "padded_size", "preprocess", "resized_size"]


@dataclasses.dataclass(frozen=True)
class ModelInput:
    """A batch ready for the model.

    Attributes:
        images: ``float32 (B, 3, H, W)`` normalised, zero-padded.
        image_sizes: ``(h, w)`` of each resized image inside ``images``.
        frame_sizes: ``(H, W)`` of each original frame (results go back there).
    """

    images: Tensor
    image_sizes: list[tuple[int, int]]
    frame_sizes: list[tuple[int, int]]


@functools.lru_cache(maxsize=256)
def resized_size(height: int, width: int, min_size: int, max_size: int) -> tuple[int, int]:
    """``(h, w)`` of a ``height x width`` frame after the model's resize (computed once
    per frame size: torchvision's float32 arithmetic costs a few host tensor ops)."""
    short, long = min(height, width), max(height, width)
    # As torchvision's transform: a Python number divided by a float32 tensor (which
    # is not the float32 of the exact quotient), then
    # interpolate(scale_factor=s, recompute_scale_factor=True), i.e. floor(side * s).
    scale = float(
        torch.minimum(
            float(min_size) / torch.tensor(short, dtype=torch.float32),
            float(max_size) / torch.tensor(long, dtype=torch.float32),
        )
    )
    return (max(1, math.floor(height * scale)), max(1, math.floor(width * scale)))


def padded_size(sizes: Sequence[tuple[int, int]], divisibility: int) -> tuple[int, int]:
    """The smallest ``(H, W)`` holding every size, rounded up to ``divisibility``."""
    h = max(s[0] for s in sizes)
    w = max(s[1] for s in sizes)
    d = max(1, divisibility)
    return (math.ceil(h / d) * d, math.ceil(w / d) * d)


def preprocess(
    images: Sequence[Tensor],
    spec: InputSpec,
    *,
    device: torch.device | str | None = None,
    sizes: Sequence[tuple[int, int]] | None = None,
    pad_to: tuple[int, int] | None = None,
    batch_to: int | None = None,
    channels_last: bool = False,
) -> ModelInput:
    """Resize, normalise and pad ``uint8 (H, W, 3)`` RGB frames into one batch.

    Args:
        images: frames, sizes may differ; all on one device.
        spec: the model's input spec.
        device: where the batch goes (default: the frames' device).
        sizes: the ``(h, w)`` each frame is resized to (training's scale
            jitter, or the frames' own sizes for no resize); default: the
            spec's rule (:func:`resized_size`).
        pad_to: pad to exactly this ``(H, W)`` instead of the smallest
            multiple of ``size_divisibility`` (static shapes). A resized
            frame larger than it is a ``ValueError``.
        batch_to: add all-zero images up to this batch size (static shapes);
            ``image_sizes``/``frame_sizes`` still list only the real frames.
        channels_last: return ``images`` in channels-last memory format.

    Returns:
        a :class:`ModelInput`.
    """
    if not images:
        raise ValueError("preprocess needs at least one image")
    dev = torch.device(device) if device is not None else images[0].device
    frame_sizes = [(int(im.shape[0]), int(im.shape[1])) for im in images]
    if sizes is None:
        sizes = [resized_size(h, w, spec.min_size, spec.max_size) for h, w in frame_sizes]
    elif len(sizes) != len(images):
        raise ValueError(f"{len(sizes)} sizes for {len(images)} images")
    sizes = [(int(h), int(w)) for h, w in sizes]
    pad = padded_size(sizes, spec.size_divisibility)
    if pad_to is not None:
        if pad[0] > pad_to[0] or pad[1] > pad_to[1]:
            raise ValueError(
                f"frames resize to {pad[0]}x{pad[1]} (padded), larger than the fixed input "
                f"size {pad_to[0]}x{pad_to[1]} of the compiled model"
            )
        pad = pad_to
    total = max(len(images), batch_to or 0)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    out = torch.zeros((total, 3, *pad), dtype=torch.float32, device=dev)
    out = out.contiguous(memory_format=memory_format)
    scale_, shift = _affine(spec, dev)
    for indices in _groups(list(zip(frame_sizes, sizes, strict=True))):
        h, w = sizes[indices[0]]
        batch = _resize(torch.stack([images[i] for i in indices]).to(dev), h, w, spec)
        batch = batch.mul_(scale_).add_(shift)
        if indices == list(range(indices[0], indices[0] + len(indices))):
            out[indices[0] : indices[0] + len(indices), :, :h, :w] = batch  # one copy
            continue
        for j, i in enumerate(indices):
            out[i, :, :h, :w] = batch[j]
    return ModelInput(images=out, image_sizes=sizes, frame_sizes=frame_sizes)


def _groups(keys: Sequence[object]) -> list[list[int]]:
    """Indices of frames grouped by (frame size, resized size), in first-seen order."""
    groups: dict[object, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _resize(batch: Tensor, h: int, w: int, spec: InputSpec) -> Tensor:
    """``uint8 (n, H, W, 3)`` -> ``float32 (n, 3, h, w)`` in the model's channel order."""
    x = batch.permute(0, 3, 1, 2)
    if spec.channel_order.upper() == "BGR":
        x = x.flip(1)
    x = x.float()
    if (h, w) != tuple(x.shape[-2:]):
        x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    return x.contiguous()


@functools.lru_cache(maxsize=16)
def _affine(spec: InputSpec, device: torch.device) -> tuple[Tensor, Tensor]:
    """``x * a + b`` equal to ``(x / scale - mean) / std``, per channel ``(3, 1, 1)``
    (made once per spec and device)."""
    mean = torch.tensor(spec.mean, dtype=torch.float64)
    std = torch.tensor(spec.std, dtype=torch.float64)
    a = 1.0 / (spec.scale * std)
    b = -mean / std
    return (
        to_device(a.to(torch.float32).view(3, 1, 1), device),
        to_device(b.to(torch.float32).view(3, 1, 1), device),
    )
