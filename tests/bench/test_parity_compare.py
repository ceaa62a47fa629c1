"""The comparison of ``streamseg.bench.parity`` (gpu-check's parity step), on the CPU.

torchvision does not run on this machine's torch, so the matching and the
figures are checked on streamseg against itself: the small Mask R-CNN, the
same weights, the same frames. The GPU step (``streamseg.bench.versus``)
compares with torchvision's model; that part is skipped here.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from streamseg.bench.parity import (
    Detections,
    compare_finds,
    compare_same,
    match,
    parity_weights,
    torchvision_maskrcnn,
)
from streamseg.bench.versus import main as versus_main
from streamseg.models import build_model
from streamseg.segment import Segmenter
from tests.segment.conftest import SMALL, scene_batch


@pytest.fixture(scope="module")
def detections() -> list[Detections]:
    seg = Segmenter(**SMALL)
    return [Detections.from_instances(r) for r in seg.segment(scene_batch([(96, 160), (96, 160)]))]


def _shift(d: Detections, dx: float) -> Detections:
    return dataclasses.replace(d, boxes=d.boxes + torch.tensor([dx, 0.0, dx, 0.0]))


def test_the_same_detections_pass_in_any_order(detections: list[Detections]) -> None:
    d = detections[0]
    assert len(d) > 5  # score threshold 0: plenty to match
    order = torch.randperm(len(d), generator=torch.Generator().manual_seed(3))
    shuffled = Detections(d.boxes[order], d.labels[order], d.scores[order], d.masks[order])
    result = compare_same(d, shuffled)
    assert result["passed"] and result["matched"] == len(d) and result["max_box_diff_px"] == 0
    assert result["min_mask_iou"] == 1.0
    assert sorted(j for _, j in match(d, shuffled)) == list(range(len(d)))


def test_what_differs_fails(detections: list[Detections]) -> None:
    d = detections[0]
    assert compare_same(d, _shift(d, 0.4))["passed"]
    moved = compare_same(d, _shift(d, 0.6))
    assert not moved["passed"] and moved["max_box_diff_px"] == pytest.approx(0.6, abs=1e-3)
    fewer = Detections(d.boxes[:-1], d.labels[:-1], d.scores[:-1], d.masks[:-1])
    assert not compare_same(d, fewer)["passed"]
    assert compare_finds(fewer, d)["passed"] and not compare_finds(d, fewer)["passed"]
    relabelled = dataclasses.replace(d, labels=d.labels % (int(d.labels.max()) + 1) + 1)
    assert match(d, relabelled) == [] or not compare_same(d, relabelled)["passed"]
    thin = dataclasses.replace(d, masks=d.masks & (torch.rand(d.masks.shape) < 0.5))
    finds = compare_finds(d, thin)
    assert not finds["passed"] and finds["min_mask_iou"] < 0.9


def test_another_frame_is_not_the_same(detections: list[Detections]) -> None:
    a = detections[0]
    assert compare_same(a, a)["passed"]
    later = Segmenter(**SMALL).segment(scene_batch([(96, 160)], index=40))[0]
    assert not compare_same(a, Detections.from_instances(later))["passed"]
    smaller = Segmenter(**SMALL).segment(scene_batch([(120, 90)]))[0]
    with pytest.raises(ValueError, match="frames of different sizes"):
        compare_same(a, Detections.from_instances(smaller))


def test_parity_weights_are_rebuilt_from_the_keys() -> None:
    state = build_model("maskrcnn_small").state_dict()
    a, b = parity_weights(state), parity_weights(state)
    assert a.keys() == state.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    plain = parity_weights(state, sharpen=False)
    key = next(k for k in state if k.startswith("roi_heads.box_predictor.cls_score.weight"))
    torch.testing.assert_close(a[key], 6.0 * plain[key])


def test_torchvision_part_needs_torchvision(tmp_path: Path) -> None:
    if importlib.util.find_spec("torchvision") is None:
        with pytest.raises(ImportError):
            torchvision_maskrcnn({})
    out = tmp_path / "parity.json"
    code = versus_main(["parity", "--out", str(out)])
    report = json.loads(out.read_text())
    if not torch.cuda.is_available():
        assert code == 2 and report["error"] == "no CUDA GPU"
    elif importlib.util.find_spec("torchvision") is None:
        assert code == 2 and "torchvision is not installed" in report["skipped"]
    else:
        pytest.skip("a GPU with torchvision: gpu-check.sh runs the real comparison")


def test_timing_goals() -> None:
    from streamseg.bench.versus import _goals

    rows = [
        {"config": "fp32_b1_eager", "ratio": 0.85, "streamseg_fps": 20.0},
        {"config": "bf16_b8_inductor", "ratio": 0.5, "streamseg_fps": 160.0},
        {"config": "fp32_b1_inductor", "skipped": "30 s left of the budget"},
    ]
    goals = _goals(rows)
    assert goals["fp32_b1_eager_vs_torchvision"]["met"] is False
    assert goals["bf16_b8_inductor_fps"] == {"fps": 160.0, "goal": ">= 150.0", "met": True}
    assert _goals(rows[2:]) == {}
