"""MaskCrops: box-local masks behave as the frame-size masks they stand for."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from streamseg.types import Instances, MaskCrops, mask_grid


@st.composite
def masks(draw: st.DrawFn) -> torch.Tensor:
    """Frame-size masks whose set pixels lie in a random box each (on every edge too)."""
    h, w, n = draw(st.integers(1, 30)), draw(st.integers(1, 30)), draw(st.integers(0, 4))
    out = torch.zeros((n, h, w), dtype=torch.bool)
    for i in range(n):
        x0, x1 = sorted(draw(st.lists(st.integers(0, w), min_size=2, max_size=2)))
        y0, y1 = sorted(draw(st.lists(st.integers(0, h), min_size=2, max_size=2)))
        gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        out[i, y0:y1, x0:x1] = torch.rand((y1 - y0, x1 - x0), generator=gen) < 0.6
    return out


@settings(max_examples=150, deadline=None)
@given(full=masks(), stride=st.integers(1, 9))
def test_crops_round_trip_and_sample_the_grid_of_the_frame_masks(
    full: torch.Tensor, stride: int
) -> None:
    crops = MaskCrops.from_masks(full)
    assert crops.shape == tuple(full.shape) and len(crops) == full.shape[0]
    assert torch.equal(crops.to_masks(), full)
    assert torch.equal(mask_grid(crops, stride), mask_grid(full, stride))
    assert torch.equal(crops.grid(stride), full[:, stride // 2 :: stride, stride // 2 :: stride])


def crops3() -> MaskCrops:
    full = torch.zeros((3, 6, 8), dtype=torch.bool)
    full[0, 1:3, 2:5] = True
    full[1, 5, 7] = True
    full[2, 0:6, 0] = True
    return MaskCrops.from_masks(full)


@pytest.mark.parametrize(
    "index",
    [
        1,
        -1,
        slice(0, 2),
        slice(None, None, 2),
        torch.tensor([2, 0]),
        torch.tensor([True, False, True]),
        [1, 1],
    ],
)
def test_indexing_picks_the_same_masks_as_a_tensor(index: object) -> None:
    crops = crops3()
    full = crops.to_masks()
    want = full[index] if not isinstance(index, int) else full[index][None]
    got = crops[index]  # type: ignore[index]
    assert isinstance(got, MaskCrops) and torch.equal(got.to_masks(), want)


def test_instances_carry_crops() -> None:
    crops = crops3()
    inst = Instances(
        image_size=(6, 8),
        boxes=torch.rand(3, 4),
        scores=torch.rand(3),
        labels=torch.ones(3, dtype=torch.int64),
        masks=crops,
    )
    full = crops.to_masks()
    frame = inst.frame_masks()
    assert frame is not None and torch.equal(frame, full)
    picked = inst[inst.scores >= 0][torch.tensor([2, 1])]
    assert isinstance(picked.masks, MaskCrops)
    assert torch.equal(picked.masks.to_masks(), full[[2, 1]])
    both = Instances.cat([inst, inst[0]])
    assert isinstance(both.masks, MaskCrops) and len(both.masks) == 4
    mixed = Instances.cat([inst, inst[0].replace(masks=full[:1])])
    assert isinstance(mixed.masks, torch.Tensor) and torch.equal(mixed.masks[3], full[0])
    assert isinstance(inst.to("cpu").masks, MaskCrops)
    with pytest.raises(ValueError, match=r"Instances.masks must be \(2, 6, 8\) crops"):
        inst.replace(
            boxes=torch.rand(2, 4), scores=torch.rand(2), labels=torch.ones(2, dtype=torch.int64)
        )


def test_bad_crops_name_the_problem() -> None:
    one = torch.ones((2, 3), dtype=torch.bool)
    with pytest.raises(
        ValueError, match=r"boxes\[0\] = \[6, 0, 9, 2\] is not inside the 6x8 frame"
    ):
        MaskCrops(image_size=(6, 8), boxes=torch.tensor([[6, 0, 9, 2]]), crops=[one])
    with pytest.raises(ValueError, match=r"crops\[0\] must be bool \(2, 2\)"):
        MaskCrops(image_size=(6, 8), boxes=torch.tensor([[0, 0, 2, 2]]), crops=[one])
    with pytest.raises(ValueError, match=r"must be \(1, 4\) for 1 crops"):
        MaskCrops(image_size=(6, 8), boxes=torch.zeros((2, 4), dtype=torch.int64), crops=[one])


def test_to_moves_every_crop_in_one_copy() -> None:
    crops = crops3()
    assert crops.to("cpu") is crops
    moved = crops.to("meta")
    assert moved.device.type == "meta" and moved.boxes.device.type == "cpu"
    assert [tuple(c.shape) for c in moved.crops] == [tuple(c.shape) for c in crops.crops]
