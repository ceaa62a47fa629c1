"""Box-local masks: the RLE written from crops equals pycocotools' of the frame-size mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pycocotools import mask as coco_mask

from streamseg import ops
from streamseg.ops import reference as ref

Box = tuple[int, int, int, int]


def frame_masks(crops: list[torch.Tensor], boxes: list[Box], size: tuple[int, int]) -> torch.Tensor:
    """The crops pasted into zeros, one frame-size mask each (written independently)."""
    out = torch.zeros((len(crops), *size), dtype=torch.bool)
    for i, (crop, (x0, y0, x1, y1)) in enumerate(zip(crops, boxes, strict=True)):
        out[i, y0:y1, x0:x1] = crop
    return out


def coco_strings(masks: torch.Tensor) -> list[str]:
    if masks.shape[0] == 0:
        return []
    arr = np.asfortranarray(masks.permute(1, 2, 0).numpy().astype(np.uint8))
    return [r["counts"].decode() for r in coco_mask.encode(arr)]


def check(crops: list[torch.Tensor], boxes: list[Box], size: tuple[int, int]) -> None:
    """crops_to_rle == pycocotools == today's masks_to_rle (native and reference), byte for byte."""
    got = ops.crops_to_rle(crops, torch.tensor(boxes, dtype=torch.int64).reshape(-1, 4), size)
    full = frame_masks(crops, boxes, size)
    assert [r["counts"] for r in got] == coco_strings(full)
    assert got == ops.masks_to_rle(full)
    assert got == ref.masks_to_rle(full)
    assert all(r["size"] == list(size) for r in got)


@st.composite
def crop_sets(draw: st.DrawFn) -> tuple[list[torch.Tensor], list[Box], tuple[int, int]]:
    h = draw(st.integers(1, 24))
    w = draw(st.integers(1, 24))
    n = draw(st.integers(0, 5))
    crops, boxes = [], []
    for _ in range(n):
        x0, x1 = sorted(draw(st.lists(st.integers(0, w), min_size=2, max_size=2)))
        y0, y1 = sorted(draw(st.lists(st.integers(0, h), min_size=2, max_size=2)))
        fill = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
        seed = draw(st.integers(0, 2**31 - 1))
        gen = torch.Generator().manual_seed(seed)
        crops.append(torch.rand((y1 - y0, x1 - x0), generator=gen) < fill)
        boxes.append((x0, y0, x1, y1))
    return crops, boxes, (h, w)


@settings(max_examples=300, deadline=None)
@given(case=crop_sets())
def test_crops_to_rle_equals_pycocotools_on_random_crops(case) -> None:  # type: ignore[no-untyped-def]
    check(*case)


@pytest.mark.parametrize(
    ("size", "box"),
    [
        ((6, 9), (0, 0, 9, 6)),  # the whole frame
        ((6, 9), (0, 2, 3, 4)),  # left edge
        ((6, 9), (5, 1, 9, 4)),  # right edge
        ((6, 9), (2, 0, 6, 3)),  # top edge
        ((6, 9), (2, 3, 6, 6)),  # bottom edge
        ((6, 9), (3, 0, 7, 6)),  # top and bottom: runs join across columns
        ((6, 9), (8, 5, 9, 6)),  # the last pixel, one pixel box
        ((6, 9), (0, 0, 1, 1)),  # the first pixel
        ((1, 1), (0, 0, 1, 1)),  # one pixel frame
        ((6, 9), (4, 4, 4, 4)),  # empty box
        ((6, 9), (4, 0, 4, 6)),  # zero width, full height
    ],
)
@pytest.mark.parametrize("fill", ["ones", "zeros", "noise"])
def test_crops_to_rle_edge_boxes(size: tuple[int, int], box: Box, fill: str) -> None:
    x0, y0, x1, y1 = box
    shape = (y1 - y0, x1 - x0)
    crop = {
        "ones": torch.ones(shape, dtype=torch.bool),
        "zeros": torch.zeros(shape, dtype=torch.bool),
        "noise": torch.rand(shape, generator=torch.Generator().manual_seed(7)) > 0.5,
    }[fill]
    check([crop], [box], size)
    # Next to a second mask, so that runs of two masks never mix.
    check([crop, torch.ones(shape, dtype=torch.bool)], [box, box], size)


def test_crops_to_rle_large_frame_counts() -> None:
    """1080p: counts over 2**20 take five 5-bit groups; several masks in one call."""
    size = (1080, 1920)
    yy, xx = torch.meshgrid(torch.arange(100), torch.arange(150), indexing="ij")
    blob = ((yy - 50) / 50) ** 2 + ((xx - 75) / 75) ** 2 < 1
    boxes = [(1770, 980, 1920, 1080), (0, 0, 150, 100), (900, 500, 1050, 600)]
    check([blob, blob, blob], boxes, size)
    check([], [], size)


def test_crops_to_rle_rejects_bad_input() -> None:
    crop = torch.ones((2, 3), dtype=torch.bool)
    with pytest.raises(ValueError, match="integers"):
        ops.crops_to_rle([crop], torch.tensor([[0.0, 0, 3, 2]]), (4, 4))
    with pytest.raises(ValueError, match="same length"):
        ops.crops_to_rle([crop, crop], torch.tensor([[0, 0, 3, 2]]), (4, 4))
    with pytest.raises(ValueError, match=r"boxes\[0\] = \[2, 0, 5, 2\] is not inside the 4x4"):
        ops.crops_to_rle([crop], torch.tensor([[2, 0, 5, 2]]), (4, 4))
    with pytest.raises(ValueError, match=r"crops\[0\] must be \(2, 2\)"):
        ops.crops_to_rle([crop], torch.tensor([[0, 0, 2, 2]]), (4, 4))
