"""Training augmentation: scale jitter and horizontal flips, and model input.

Random choices come from a ``torch.Generator`` the caller seeds per sample,
so an image gets the same augmentation whichever worker, process or resumed
run loads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from streamseg.train.data import Sample

__all__ = ["TrainTransform", "batch_images", "hflip", "resize", "resized_shape"]


def resized_shape(height: int, width: int, min_size: int, max_size: int) -> tuple[int, int]:
    """``(h, w)`` after scaling the shorter side to ``min_size``, longer <= ``max_size``."""
    scale = min(min_size / min(height, width), max_size / max(height, width))
    return max(1, round(height * scale)), max(1, round(width * scale))


def resize_image(image: Tensor, size: tuple[int, int]) -> Tensor:
    """``uint8 (H, W, 3)`` -> ``uint8 (h, w, 3)``, bilinear (antialiased when shrinking)."""
    if tuple(image.shape[:2]) == size:
        return image
    shrink = size[0] < image.shape[0] or size[1] < image.shape[1]
    x = image.permute(2, 0, 1).unsqueeze(0).float()
    y = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=shrink)
    return y.round_().clamp_(0, 255).to(torch.uint8)[0].permute(1, 2, 0).contiguous()


def resize(sample: Sample, size: tuple[int, int]) -> Sample:
    """Resize image, boxes and masks of ``sample`` to ``size = (h, w)``."""
    h, w = sample.size
    if (h, w) == tuple(size):
        return sample
    sy, sx = size[0] / h, size[1] / w
    boxes = sample.boxes * torch.tensor([sx, sy, sx, sy], dtype=sample.boxes.dtype)
    if len(sample.masks):
        masks = F.interpolate(sample.masks[None].float(), size=size, mode="bilinear")[0] >= 0.5
    else:
        masks = torch.zeros((0, *size), dtype=torch.bool)
    return dataclasses.replace(
        sample, image=resize_image(sample.image, size), boxes=boxes, masks=masks
    )


def hflip(sample: Sample) -> Sample:
    """Mirror ``sample`` left to right (boxes stay ``xyxy`` with x1 < x2)."""
    w = sample.size[1]
    boxes = sample.boxes[:, [2, 1, 0, 3]] * torch.tensor([-1.0, 1.0, -1.0, 1.0]) + torch.tensor(
        [w, 0.0, w, 0.0]
    )
    return dataclasses.replace(
        sample, image=sample.image.flip(1), boxes=boxes, masks=sample.masks.flip(2)
    )


@dataclasses.dataclass(frozen=True)
class TrainTransform:
    """Scale jitter (one of ``min_sizes`` per image) and random flips.

    Attributes:
        min_sizes: shorter-side lengths to draw from (pixels).
        max_size: cap on the longer side (pixels).
        hflip_prob: probability of a horizontal flip.
    """

    min_sizes: tuple[int, ...]
    max_size: int
    hflip_prob: float = 0.5

    def __call__(self, sample: Sample, generator: torch.Generator) -> Sample:
        pick = int(torch.randint(len(self.min_sizes), (1,), generator=generator))
        flip = float(torch.rand((), generator=generator)) < self.hflip_prob
        size = resized_shape(*sample.size, self.min_sizes[pick], self.max_size)
        out = resize(sample, size)
        out = _drop_empty(out)
        return hflip(out) if flip else out


def _drop_empty(sample: Sample) -> Sample:
    """Remove instances whose box or mask vanished in resizing."""
    b = sample.boxes
    keep = (b[:, 2] - b[:, 0] >= 1) & (b[:, 3] - b[:, 1] >= 1) & sample.masks.flatten(1).any(1)
    if bool(keep.all()):
        return sample
    return dataclasses.replace(
        sample, boxes=b[keep], labels=sample.labels[keep], masks=sample.masks[keep]
    )


def batch_images(
    images: Sequence[Tensor],
    *,
    channel_order: str,
    scale: float,
    mean: Sequence[float],
    std: Sequence[float],
    size_divisibility: int,
    device: torch.device | str = "cpu",
) -> tuple[Tensor, list[tuple[int, int]]]:
    """``uint8 (H, W, 3)`` RGB images -> normalised, zero-padded ``float32 (B, 3, H, W)``.

    Follows a model's ``InputSpec``: channels reordered to ``channel_order``,
    divided by ``scale``, then ``(x - mean) / std``; height and width padded
    up to a multiple of ``size_divisibility``. Returns the batch and the
    unpadded ``(h, w)`` of each image.
    """
    sizes = [(int(im.shape[0]), int(im.shape[1])) for im in images]
    div = max(1, size_divisibility)
    ph = -(-max(h for h, _ in sizes) // div) * div
    pw = -(-max(w for _, w in sizes) // div) * div
    out = torch.zeros((len(images), 3, ph, pw), dtype=torch.float32, device=device)
    m = torch.tensor(mean, dtype=torch.float32, device=device).view(3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=device).view(3, 1, 1)
    for i, im in enumerate(images):
        x = im.to(device, non_blocking=True).permute(2, 0, 1).float()
        if channel_order.upper() == "BGR":
            x = x.flip(0)
        h, w = sizes[i]
        out[i, :, :h, :w] = (x / scale - m) / s
    return out, sizes
