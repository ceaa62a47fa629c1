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
from streamseg.ops import rle as numpy_rle

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
    """crops_to_rle (C++ and numpy) == pycocotools == masks_to_rle (native and reference),
    byte for byte."""
    box_tensor = torch.tensor(boxes, dtype=torch.int64).reshape(-1, 4)
    got = ops.crops_to_rle(crops, box_tensor, size)
    full = frame_masks(crops, boxes, size)
    assert [r["counts"] for r in got] == coco_strings(full)
    assert got == numpy_rle.crops_to_rle(crops, box_tensor, size)
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


def test_crops_to_rle_reads_strided_and_byte_crops() -> None:
    """Views into a larger mask (row and column strides) and 0/1 bytes read as bools."""
    size = (40, 50)
    gen = torch.Generator().manual_seed(5)
    big = torch.rand((30, 60), generator=gen) > 0.4
    crops = [big[2:20, 5:17], big[::2, ::3][:10, :12], big.t()[10:25, 3:20], big[:7, :9].byte() * 3]
    boxes = [(0, 0, 12, 18), (38, 30, 50, 40), (10, 5, 27, 20), (41, 0, 50, 7)]
    assert not crops[1].is_contiguous() and not crops[2].is_contiguous()
    check([c.bool() if c.dtype != torch.bool else c for c in crops], boxes, size)
    box_tensor = torch.tensor(boxes)
    assert ops.crops_to_rle(crops, box_tensor, size) == ops.crops_to_rle(
        [c.bool() for c in crops], box_tensor, size
    )


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


PASTE_FRAME = (23, 31)
PASTE_CASES = {
    "empty": [],
    "one": [[3.2, 4.7, 15.1, 12.9]],
    "border": [[0.0, 0.0, 31.0, 23.0], [-3.0, -2.5, 5.0, 4.0], [25.5, 18.0, 34.0, 26.0]],
    "out_of_frame": [[40.0, 30.0, 60.0, 50.0], [-20.0, -20.0, -10.0, -12.0], [5, 30, 9, 40]],
    "degenerate": [[5.0, 5.0, 5.0, 5.0], [9.0, 9.0, 4.0, 14.0], [10.0, 2.0, 10.4, 20.0]],
    "large": [[-100.0, -80.0, 200.0, 150.0]],
}


def smooth_probs(n: int, seed: int, size: int = 28) -> torch.Tensor:
    """Mask-head-like probabilities: smooth blobs, many pixels near 0.5."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn((n, 1, size, size), generator=gen) * 4
    return torch.sigmoid(torch.nn.functional.avg_pool2d(logits, 5, 1, 2))[:, 0]


def check_paste(
    probs: torch.Tensor, boxes: torch.Tensor, size: tuple[int, int], thr: float
) -> None:
    crops, regions = ops.paste_masks_crops(probs, boxes, size, thr)
    assert regions.dtype == torch.int64 and regions.shape == (len(boxes), 4)
    want = ref.paste_masks_binary(probs, boxes, size, thr)
    native = ops.paste_masks_binary(probs, boxes, size, thr)
    h, w = size
    for i, (x0, y0, x1, y1) in enumerate(regions.tolist()):
        assert 0 <= x0 <= x1 <= w and 0 <= y0 <= y1 <= h
        assert crops[i].dtype == torch.bool and crops[i].shape == (y1 - y0, x1 - x0)
        assert torch.equal(crops[i], want[i, y0:y1, x0:x1])
        outside = want[i].clone()
        outside[y0:y1, x0:x1] = False
        assert not outside.any(), "the frame-size paste is set outside the crop's region"
    assert torch.equal(want, native)
    assert ops.crops_to_rle(crops, regions, size) == ops.masks_to_rle(native)


@pytest.mark.parametrize("case", PASTE_CASES)
@pytest.mark.parametrize("threshold", [0.5, 0.0, 0.93])
def test_paste_crops_equal_the_frame_paste(case: str, threshold: float) -> None:
    boxes = torch.tensor(PASTE_CASES[case], dtype=torch.float32).reshape(-1, 4)
    check_paste(smooth_probs(len(boxes), seed=3), boxes, PASTE_FRAME, threshold)


def test_paste_crops_equal_the_frame_paste_on_random_detections() -> None:
    """Many boxes of all sizes, some across the frame's edges, at the model's threshold."""
    gen = torch.Generator().manual_seed(11)
    size = (180, 320)
    centres = torch.rand((200, 2), generator=gen) * torch.tensor([360.0, 220.0]) - 20
    half = torch.rand((200, 2), generator=gen) * 60 + 0.3
    boxes = torch.cat((centres - half, centres + half), dim=1)
    check_paste(smooth_probs(200, seed=12), boxes, size, 0.5)


def test_paste_crops_reject_negative_threshold() -> None:
    with pytest.raises(ValueError, match="threshold must be >= 0"):
        ops.paste_masks_crops(torch.zeros(1, 4, 4), torch.tensor([[2.0, 2, 9, 9]]), (8, 8), -0.1)


def test_packed_paste_batched_equals_one_mask_at_a_time() -> None:
    """The GPU's batched paste and the CPU's loop write the same bits, crops packed."""
    gen = torch.Generator().manual_seed(21)
    size = (120, 200)
    centres = torch.rand((60, 2), generator=gen) * torch.tensor([240.0, 150.0]) - 20
    half = torch.rand((60, 2), generator=gen) * 40 + 0.3
    boxes = torch.cat((centres - half, centres + half), dim=1)
    probs = smooth_probs(60, seed=22)
    regions = ops.paste_regions(boxes, 28, size)
    total = int(((regions[:, 2] - regions[:, 0]) * (regions[:, 3] - regions[:, 1])).sum())
    batched = ref.paste_masks_packed(probs, boxes, regions, total, 0.5)
    looped = ref.paste_masks_packed_loop(probs, boxes, regions, total, 0.5)
    assert batched.shape == (total,) and torch.equal(batched, looped)
    assert torch.equal(batched, ops.paste_masks_packed(probs, boxes, regions, total, 0.5))
