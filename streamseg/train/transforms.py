"""Training augmentation (scale jitter, horizontal flips) and the training batch.

Augmentation picks each image's model-input size and flips it; the image
itself is resized, normalised and padded by
:func:`streamseg.segment.preprocess.preprocess`, the function ``serve``,
``eval`` and ``label`` use, so training sees exactly the input serving
gives the model. Boxes and masks are resized here to the same size
(:func:`streamseg.segment.preprocess.resized_size`).

Random choices come from a ``torch.Generator`` the caller seeds per sample,
so an image gets the same augmentation whichever worker, process or resumed
run loads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from streamseg.models import InputSpec
from streamseg.segment.preprocess import preprocess, resized_size
from streamseg.train.data import Sample

__all__ = ["TrainSample", "TrainTransform", "hflip", "resize_targets", "train_batch"]


@dataclasses.dataclass(frozen=True)
class TrainSample:
    """An augmented training image, its model-input size and its targets at that size.

    Attributes:
        image: ``uint8 (H, W, 3)`` RGB at the dataset's resolution (flipped
            if drawn); :func:`train_batch` resizes it to ``input_size``.
        input_size: ``(h, w)`` the image is resized to.
        boxes: ``float32 (N, 4)`` ``xyxy`` pixels of ``input_size``.
        labels: ``int64 (N,)``.
        masks: ``bool (N, h, w)``.
        image_id: the dataset's id of the image.
    """

    image: Tensor
    input_size: tuple[int, int]
    boxes: Tensor
    labels: Tensor
    masks: Tensor
    image_id: int

    def __len__(self) -> int:
        """Number of instances."""
        return int(self.labels.shape[0])


def resize_targets(sample: Sample, size: tuple[int, int]) -> TrainSample:
    """``sample`` with boxes and masks scaled to ``size = (h, w)``; the image is kept."""
    h, w = sample.size
    boxes, masks = sample.boxes, sample.masks
    if (h, w) != tuple(size):
        sy, sx = size[0] / h, size[1] / w
        boxes = boxes * torch.tensor([sx, sy, sx, sy], dtype=boxes.dtype)
        if len(masks):
            masks = F.interpolate(masks[None].float(), size=size, mode="bilinear")[0] >= 0.5
        else:
            masks = torch.zeros((0, *size), dtype=torch.bool)
    input_size = (int(size[0]), int(size[1]))
    return TrainSample(sample.image, input_size, boxes, sample.labels, masks, sample.image_id)


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

    The model-input size follows the serving rule
    (:func:`~streamseg.segment.preprocess.resized_size`) with the drawn
    shorter side.

    Attributes:
        min_sizes: shorter-side lengths to draw from (pixels).
        max_size: cap on the longer side (pixels).
        hflip_prob: probability of a horizontal flip.
    """

    min_sizes: tuple[int, ...]
    max_size: int
    hflip_prob: float = 0.5

    def __call__(self, sample: Sample, generator: torch.Generator) -> TrainSample:
        pick = int(torch.randint(len(self.min_sizes), (1,), generator=generator))
        flip = float(torch.rand((), generator=generator)) < self.hflip_prob
        if flip:
            sample = hflip(sample)
        size = resized_size(*sample.size, self.min_sizes[pick], self.max_size)
        return _drop_empty(resize_targets(sample, size))


def _drop_empty(sample: TrainSample) -> TrainSample:
    """Remove instances whose box or mask vanished in resizing."""
    b = sample.boxes
    keep = (b[:, 2] - b[:, 0] >= 1) & (b[:, 3] - b[:, 1] >= 1) & sample.masks.flatten(1).any(1)
    if bool(keep.all()):
        return sample
    return dataclasses.replace(
        sample, boxes=b[keep], labels=sample.labels[keep], masks=sample.masks[keep]
    )


def train_batch(
    samples: Sequence[TrainSample], spec: InputSpec, device: torch.device | str = "cpu"
) -> tuple[Tensor, list[tuple[int, int]], list[dict[str, Any]]]:
    """Augmented samples -> ``(images, image_sizes, targets)`` for a training step.

    ``images`` is :func:`~streamseg.segment.preprocess.preprocess`'s batch
    (each image resized to its ``input_size``), ``targets`` one dict of
    ``boxes``, ``labels`` and ``uint8 masks`` per image, on ``device``
    (copied in one transfer: one host sync on a GPU, not three per image).
    """
    inputs = preprocess(
        [s.image for s in samples],
        spec,
        device=device,
        sizes=[s.input_size for s in samples],
    )
    targets = _targets_to(samples, torch.device(device))
    return inputs.images, inputs.image_sizes, targets


def _targets_to(samples: Sequence[TrainSample], device: torch.device) -> list[dict[str, Tensor]]:
    """The samples' boxes, labels and masks on ``device``, packed into one byte buffer
    on the host and copied once; each target is a view of it there."""
    pieces = [
        (s.boxes.to(torch.float32).contiguous(), s.labels.to(torch.int64).contiguous(),
         s.masks.to(torch.uint8).contiguous())
        for s in samples
    ]  # fmt: skip
    if device.type == "cpu":
        return [{"boxes": b, "labels": lab, "masks": m} for b, lab, m in pieces]
    # Boxes (4-byte) and labels (8-byte) first, all masks last: each view stays aligned.
    order = [b for b, _, _ in pieces] + [lab for _, lab, _ in pieces] + [m for _, _, m in pieces]
    flat = [t.reshape(-1).view(torch.uint8) for t in order]
    packed = torch.cat(flat).to(device)
    views, offset = [], 0
    for t, raw in zip(order, flat, strict=True):
        chunk = packed[offset : offset + raw.numel()]
        views.append(chunk.view(t.dtype).reshape(t.shape))
        offset += raw.numel()
    n = len(pieces)
    return [
        {"boxes": views[i], "labels": views[n + i], "masks": views[2 * n + i]} for i in range(n)
    ]
