"""Training samples rendered by the synthetic scene generator, with exact ground truth."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import torch
from torch import Tensor

from streamseg.train.data.common import (
    BACKGROUND,
    DatasetError,
    GroundTruth,
    Sample,
    encode_mask,
)

__all__ = ["SyntheticDataset"]


class SyntheticDataset:
    """Frames of a synthetic scene with exact ground truth, made on the fly.

    Args:
        url: ``synthetic://?seed=..&width=..&height=..`` (the scene's own
            parameters); ``frames``, ``stride`` and ``start`` query parameters,
            when present, override the keyword arguments.
        frames: how many frames.
        stride: take every ``stride``-th frame of the scene.
        start: index of the first frame.
    """

    def __init__(self, url: str, *, frames: int = 100, stride: int = 1, start: int = 0) -> None:
        from streamseg.synthetic.scene import SyntheticScene

        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        try:
            frames = int(query.pop("frames", frames))
            stride = int(query.pop("stride", stride))
            start = int(query.pop("start", start))
        except ValueError:
            raise DatasetError(f"{url}: frames, stride and start must be integers") from None
        if frames < 1 or stride < 1 or start < 0:
            raise DatasetError(f"{url}: frames and stride must be >= 1, start >= 0")
        self.url = url
        try:
            self.scene = SyntheticScene.from_url(f"synthetic://?{urlencode(query)}")
        except ValueError as exc:
            raise DatasetError(
                f"{url}: {exc} (this dataset also takes frames, stride, start)"
            ) from None
        self.frames, self.stride, self.start = frames, stride, start
        self.native_class_names = tuple(n for n in self.scene.class_names if n != BACKGROUND)
        self._labels = torch.arange(len(self.scene.class_names), dtype=torch.int64)
        self._last: tuple[int, Sample] | None = None  # ground_truth(i) right after self[i]

    def set_class_names(self, class_names: Sequence[str]) -> None:
        index = {name: i for i, name in enumerate(class_names)}
        self._labels = torch.tensor(
            [index.get(n, -1) if n != BACKGROUND else 0 for n in self.scene.class_names],
            dtype=torch.int64,
        )
        self._last = None

    def __len__(self) -> int:
        return self.frames

    def has_instances(self, index: int) -> bool:
        """Always true: frames are not rendered just to check (empty ones train as negatives)."""
        return True

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < self.frames:
            raise IndexError(index)
        if self._last is not None and self._last[0] == index:
            return self._last[1]
        frame = self.scene.frame(self.start + index * self.stride)
        gt = frame.gt
        labels = self._labels[gt.labels.cpu()]
        keep = labels > 0
        masks = gt.frame_masks()
        if masks is None:
            masks = _box_masks(gt.boxes, gt.image_size)
        boxes, labels, masks = gt.boxes[keep].float().cpu(), labels[keep], masks[keep].bool().cpu()
        if gt.regions is not None:  # each stuff class present is one more segment
            stuff = gt.regions.masks()
            stuff_labels = self._labels[gt.regions.labels]
            wanted = stuff_labels > 0
            boxes = torch.cat((boxes, _tight_boxes(stuff[wanted])))
            labels = torch.cat((labels, stuff_labels[wanted]))
            masks = torch.cat((masks, stuff[wanted]))
        sample = Sample(
            image=frame.image.cpu(), boxes=boxes, labels=labels, masks=masks, image_id=index
        )
        self._last = (index, sample)
        return sample

    def stuff_labels(self) -> set[int]:
        """Training labels of the scene's stuff classes (regions, not instances)."""
        index = {n: i for i, n in enumerate(self.scene.class_names)}
        ids = self._labels[[index[n] for n in self.scene.stuff_class_names]].tolist()
        return {i for i in ids if i > 0}

    def ground_truth(self, index: int) -> GroundTruth:
        sample = self[index]
        stuff = self.stuff_labels()
        anns: list[dict[str, Any]] = []
        segments = torch.zeros((*sample.size, 2), dtype=torch.int64) if stuff else None
        rows = zip(sample.boxes, sample.labels, sample.masks, strict=True)
        for box, label, mask in rows:
            if segments is not None:
                segments[mask, 0] = label
            if int(label) in stuff:
                continue
            if segments is not None:
                segments[mask, 1] = len(anns) + 1
            x1, y1, x2, y2 = (float(v) for v in box)
            anns.append(
                {
                    "category_id": int(label),
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": float(mask.sum()),
                    "iscrowd": 0,
                    "segmentation": encode_mask(mask),
                }
            )
        h, w = sample.size
        return GroundTruth(index, h, w, anns, segments)


def _tight_boxes(masks: Tensor) -> Tensor:
    """``float32 (N, 4)`` xyxy boxes around ``bool (N, H, W)`` masks (exclusive ends)."""
    from streamseg.models.mask2former.postprocess import masks_to_boxes

    return masks_to_boxes(masks)


def _box_masks(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    h, w = size
    ys = torch.arange(h).view(1, h, 1)
    xs = torch.arange(w).view(1, 1, w)
    b = boxes.view(-1, 4, 1, 1)
    return (xs >= b[:, 0]) & (xs < b[:, 2]) & (ys >= b[:, 1]) & (ys < b[:, 3])
