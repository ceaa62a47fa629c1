"""COCO RLE: round trips, brute-force runs and equality with pycocotools."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pycocotools import mask as coco_mask

from streamseg import ops
from streamseg.ops.rle import string_to_counts
from tests.ops import brute


def coco_encode(masks: torch.Tensor) -> list[dict]:
    arr = np.asfortranarray(masks.permute(1, 2, 0).numpy().astype(np.uint8))
    return coco_mask.encode(arr)


def blob_masks(n: int, h: int, w: int) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    out = torch.zeros(n, h, w, dtype=torch.bool)
    for i in range(n):
        cy, cx, r = torch.rand(3).tolist()
        out[i] = (yy - cy * h) ** 2 + (xx - cx * w) ** 2 < (r * min(h, w) / 2 + 1) ** 2
    return out


CASES = {
    "all_zero": lambda: torch.zeros(2, 5, 7, dtype=torch.bool),
    "all_one": lambda: torch.ones(2, 5, 7, dtype=torch.bool),
    "single_pixel_frame": lambda: torch.tensor([[[True]], [[False]]]),
    "one_row": lambda: torch.rand(3, 1, 40) > 0.5,
    "one_column": lambda: torch.rand(3, 40, 1) > 0.5,
    "noise": lambda: torch.rand(4, 17, 23) > 0.5,
    "first_pixel_set": lambda: torch.eye(6, dtype=torch.bool)[None].repeat(2, 1, 1),
    "blobs_large_counts": lambda: blob_masks(3, 300, 400),
}


@pytest.mark.parametrize("case", CASES)
def test_rle_equals_pycocotools_and_round_trips(case: str) -> None:
    masks = CASES[case]()
    got = ops.masks_to_rle(masks)
    want = coco_encode(masks)
    assert [r["counts"] for r in got] == [w["counts"].decode() for w in want]
    assert [r["size"] for r in got] == [list(w["size"]) for w in want]
    for rle, mask in zip(got, masks, strict=True):
        assert string_to_counts(rle["counts"]) == brute.rle_counts(mask)
        back = ops.rle_to_mask(rle)
        assert back.dtype == torch.bool and torch.equal(back, mask)
        assert ops.mask_to_rle(mask) == rle
    # pycocotools decodes ours (str counts as bytes) to the same masks.
    ours = [{"size": r["size"], "counts": r["counts"].encode()} for r in got]
    if ours:
        decoded = coco_mask.decode(ours)
        assert np.array_equal(decoded.transpose(2, 0, 1).astype(bool), masks.numpy())


def test_rle_empty_batch_and_empty_frame() -> None:
    assert ops.masks_to_rle(torch.zeros(0, 4, 4, dtype=torch.bool)) == []
    rle = ops.mask_to_rle(torch.zeros(0, 3, dtype=torch.bool))
    assert rle == {"size": [0, 3], "counts": "0"}
    assert ops.rle_to_mask(rle).shape == (0, 3)


def test_rle_to_mask_reads_bytes_and_uncompressed_counts() -> None:
    mask = torch.rand(9, 8) > 0.3
    want = coco_encode(mask[None])[0]
    assert torch.equal(ops.rle_to_mask(want), mask)
    assert torch.equal(ops.rle_to_mask({"size": [9, 8], "counts": brute.rle_counts(mask)}), mask)


def test_rle_to_mask_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="size 3x3 needs 9 pixels"):
        ops.rle_to_mask({"size": [3, 3], "counts": [4, 4]})
    with pytest.raises(ValueError, match="must be a dict"):
        ops.rle_to_mask({"counts": "0"})
