"""Mask2Former's semantic and panoptic inference against plain per-segment references."""

from __future__ import annotations

import pytest
import torch

from streamseg.models import build_model
from streamseg.models.mask2former.universal import (
    panoptic_inference,
    resize_to_frame,
    semantic_inference,
)

SIZES = dict(padded_size=(64, 96), image_size=(60, 90), frame_size=(45, 70))


def _reference_panoptic(class_logits, mask_logits, is_thing, obj_thr, overlap_thr):
    """The Mask2Former merge written as the paper's loop over kept queries."""
    probs, labels = class_logits.softmax(-1).max(-1)
    k = class_logits.shape[1] - 1
    keep = (labels != k) & (probs > obj_thr)
    probs, labels = probs[keep], labels[keep]
    masks = resize_to_frame(mask_logits[keep], **SIZES).sigmoid()
    h, w = SIZES["frame_size"]
    stuff_map = torch.zeros((h, w), dtype=torch.int64)
    things = []
    if len(masks) == 0:
        return stuff_map, things
    owner = (probs[:, None, None] * masks).argmax(0)
    for q in range(len(masks)):
        won = int((owner == q).sum())
        alone = int((masks[q] >= 0.5).sum())
        segment = (owner == q) & (masks[q] >= 0.5)
        if won == 0 or alone == 0 or int(segment.sum()) == 0 or won / alone < overlap_thr:
            continue
        label = int(labels[q]) + 1
        if is_thing[label - 1]:
            things.append((label, segment))
        else:
            stuff_map[segment] = label
    return stuff_map, things


@pytest.mark.parametrize("seed", [0, 1, 3])  # each has things and stuff
def test_panoptic_matches_the_per_segment_loop(seed: int) -> None:
    torch.manual_seed(seed)
    q, k = 30, 6
    class_logits = torch.randn(q, k + 1) * 3
    class_logits[:12, torch.randint(0, k, (12,))] += 6  # some confident queries
    # Smooth blobs, so that segments survive the overlap test.
    blobs = torch.randn(q, 1, 4, 6) * 6
    mask_logits = torch.nn.functional.interpolate(blobs, size=(16, 24), mode="bilinear")[:, 0]
    is_thing = torch.tensor([True, True, False, True, False, False])
    got = panoptic_inference(
        class_logits,
        mask_logits,
        is_thing=is_thing,
        object_mask_threshold=0.5,
        overlap_threshold=0.3,
        **SIZES,
    )
    stuff_map, things = _reference_panoptic(class_logits, mask_logits, is_thing, 0.5, 0.3)
    assert got.regions is not None
    assert torch.equal(got.regions.label_map.long(), stuff_map)
    assert len(got) == len(things) and len(things) > 0
    expected = sorted((lab, m.flatten().nonzero().flatten().tolist()) for lab, m in things)
    found = sorted(
        (int(lab), m.flatten().nonzero().flatten().tolist())
        for lab, m in zip(got.labels, got.masks, strict=True)
    )
    assert found == expected
    assert bool((got.scores[:-1] >= got.scores[1:]).all())  # best first
    # Things and stuff never share a pixel.
    assert not bool((got.masks.any(0) & (got.regions.label_map > 0)).any())


def test_panoptic_hand_made_case() -> None:
    """Two stuff queries of one class (merged), one thing, one duplicate (dropped)."""
    k = 3  # classes 1 (thing) and 2, 3 (stuff)
    logits = torch.full((5, k + 1), -10.0)
    # Column c - 1 is class c; column k is "no object".
    logits[0, 0] = logits[3, 0] = 10.0  # the thing and its weaker copy
    logits[1, 1] = logits[2, 1] = 10.0  # stuff class 2, twice
    logits[4, k] = 10.0
    m = torch.full((5, 8, 8), -10.0)
    m[0, 2:5, 2:5] = 10.0  # the thing
    m[1, :, :4] = 10.0  # stuff class 2, left half
    m[2, :, 6:] = 10.0  # stuff class 2 again, right edge
    m[3, 2:5, 2:4] = 5.0  # a weaker copy of the thing, mostly hidden by it
    sizes = dict(padded_size=(32, 32), image_size=(32, 32), frame_size=(32, 32))
    got = panoptic_inference(logits, m, is_thing=torch.tensor([True, False, False]), **sizes)
    assert got.labels.tolist() == [1]
    assert got.regions is not None
    assert got.regions.labels.tolist() == [2]  # both class-2 queries are one region
    area = int(got.regions.areas[0])
    assert area == int((got.regions.label_map == 2).sum()) and area > 32 * 32 // 2
    assert not bool((got.regions.label_map == 3).any())  # query 4 has no mask


def test_panoptic_with_no_confident_query() -> None:
    got = panoptic_inference(
        torch.zeros(4, 3), torch.zeros(4, 16, 24), is_thing=torch.tensor([True, False]), **SIZES
    )
    assert len(got) == 0 and got.regions is not None and len(got.regions) == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_semantic_equals_resizing_every_class(seed: int) -> None:
    torch.manual_seed(seed)
    q, k = 20, 40
    class_logits = torch.randn(q, k + 1) * 2
    mask_logits = torch.randn(q, 16, 24) * 3
    got = semantic_inference(class_logits, mask_logits, **SIZES)
    scores = torch.einsum("qk,qhw->khw", class_logits.softmax(-1)[:, :-1], mask_logits.sigmoid())
    expected = resize_to_frame(scores, **SIZES).argmax(0) + 1
    assert len(got) == 0 and got.regions is not None
    assert torch.equal(got.regions.label_map.long(), expected)
    assert int(got.regions.areas.sum()) == 45 * 70  # every pixel has a class


def test_model_task_option_picks_the_inference() -> None:
    names = ("__background__", "disc", "ground", "water")
    common = dict(class_names=names, min_size=64, max_size=96)
    pan = build_model(
        "mask2former_tiny", task="panoptic", stuff_classes=["ground", "water"], **common
    )
    assert pan.is_thing.tolist() == [True, False, False]
    sem = build_model("mask2former_tiny", task="semantic", **common)
    torch.manual_seed(0)
    with torch.no_grad():
        out = sem(torch.randn(1, 3, 64, 96), [(64, 96)])
        (result,) = sem.postprocess(out, [(64, 96)], [(64, 96)])
    assert result.regions is not None and int(result.regions.areas.sum()) == 64 * 96
    with pytest.raises(ValueError, match="stuff_classes: 'lava' is not one of"):
        build_model("mask2former_tiny", task="panoptic", stuff_classes=["lava"], **common)
    with pytest.raises(ValueError, match="unknown task 'depth'"):
        build_model("mask2former_tiny", task="depth", **common)
