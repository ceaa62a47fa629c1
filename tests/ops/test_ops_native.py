"""Native kernels (torch.ops.streamseg) vs the PyTorch reference vs brute force.

The library is built once per machine (cached); these tests fail, rather
than skip, when it does not build where a C++ compiler exists.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from streamseg import ops
from streamseg.ops import _native
from streamseg.ops import reference as ref
from tests.ops import brute
from tests.ops.test_ops_nms import CASES as NMS_CASES
from tests.ops.test_ops_nms import clustered_boxes
from tests.ops.test_ops_paste import BOX_CASES as PASTE_CASES
from tests.ops.test_ops_paste import FRAME
from tests.ops.test_ops_rle import CASES as RLE_CASES
from tests.ops.test_ops_roi_align import ROI_CASES, fpn

pytestmark = pytest.mark.usefixtures("native")


N = torch.ops.streamseg

# --------------------------------------------------------------------------- nms


@pytest.mark.parametrize("case", NMS_CASES)
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nms_native_equals_reference_and_brute(
    case: str, threshold: float, dtype: torch.dtype
) -> None:
    boxes, scores = (t.to(dtype) for t in NMS_CASES[case])
    got = N.nms(boxes, scores, threshold)
    assert got.dtype == torch.int64
    assert got.tolist() == ref.nms(boxes, scores, threshold).tolist()
    assert got.tolist() == brute.batched_nms(boxes, scores, None, threshold)


def test_nms_many_equal_scores_keep_input_order() -> None:
    boxes = torch.tensor([[0.0, 0, 10, 10]] * 3 + [[100.0, 100, 110, 110]] * 3)
    scores = torch.full((6,), 0.5)
    assert N.nms(boxes, scores, 0.5).tolist() == [0, 3]


@pytest.mark.parametrize("num_classes", [1, 3, 80, 1000])
def test_batched_nms_native_many_classes(num_classes: int) -> None:
    boxes, scores = clustered_boxes(1500, seed=num_classes)
    idxs = torch.randint(0, num_classes, (1500,)) * 7 - 3  # any int64 values
    got = N.batched_nms(boxes, scores, idxs, 0.5)
    assert got.tolist() == ref.batched_nms(boxes, scores, idxs, 0.5).tolist()
    assert got.tolist() == brute.batched_nms(boxes, scores, idxs, 0.5)


@pytest.mark.parametrize("case", ["empty", "one", "equal_scores", "degenerate"])
def test_batched_nms_native_edge_cases(case: str) -> None:
    boxes, scores = NMS_CASES[case]
    idxs = torch.arange(len(boxes)) % 2
    got = N.batched_nms(boxes, scores, idxs, 0.5)
    assert got.tolist() == brute.batched_nms(boxes, scores, idxs, 0.5)


# --------------------------------------------------------------------------- roi_align


@pytest.mark.parametrize("case", ROI_CASES)
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("channels", [3, 16])  # planar and channels-last kernels
def test_roi_align_native_equals_reference_and_brute(
    case: str, sampling_ratio: int, aligned: bool, channels: int
) -> None:
    x = torch.randn(2, channels, 9, 11, dtype=torch.float64)
    rois = torch.tensor(ROI_CASES[case], dtype=torch.float64)
    got = N.roi_align(x, rois, 0.5, 3, 4, sampling_ratio, aligned)
    torch.testing.assert_close(got, ref.roi_align(x, rois, (3, 4), 0.5, sampling_ratio, aligned))
    want = brute.roi_align(x[:, :3], rois, (3, 4), 0.5, sampling_ratio, aligned)
    torch.testing.assert_close(got[:, :3], want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_roi_align_native_low_precision(dtype: torch.dtype) -> None:
    x = torch.randn(2, 16, 9, 11)
    rois = torch.tensor(ROI_CASES["large"] + ROI_CASES["border"])
    got = N.roi_align(x.to(dtype), rois, 0.5, 2, 2, 0, True)
    assert got.dtype == dtype
    want = ref.roi_align(x.to(dtype).float(), rois, (2, 2), 0.5, 0, True)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 3])
def test_roi_align_native_gradcheck_and_reference_gradient(
    aligned: bool, sampling_ratio: int
) -> None:
    x = torch.randn(2, 3, 6, 7, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor(
        [[0, 0.0, 0.0, 5.0, 4.0], [1, 1.5, 0.5, 12.0, 11.0], [0, -1.0, 2.0, 3.0, 3.5]],
        dtype=torch.float64,
    )

    def fn(t: torch.Tensor) -> torch.Tensor:
        return N.roi_align(t, rois, 0.5, 2, 3, sampling_ratio, aligned)

    assert torch.autograd.gradcheck(fn, (x,))
    g = torch.randn(3, 3, 2, 3, dtype=torch.float64)
    (native_grad,) = torch.autograd.grad(fn(x), x, g)
    ref_out = ref.roi_align(x, rois, (2, 3), 0.5, sampling_ratio, aligned)
    (ref_grad,) = torch.autograd.grad(ref_out, x, g)
    torch.testing.assert_close(native_grad, ref_grad)


def test_roi_align_backward_empty_and_bad_batch_index() -> None:
    grad = N.roi_align_backward(
        torch.zeros(0, 2, 3, 3), torch.zeros(0, 5), 1.0, 3, 3, 1, 2, 5, 5, 2, False
    )
    assert grad.shape == (1, 2, 5, 5) and torch.all(grad == 0)
    with pytest.raises(RuntimeError, match="roi batch index 3"):
        N.roi_align(torch.zeros(2, 1, 4, 4), torch.tensor([[3.0, 0, 0, 2, 2]]), 1.0, 2, 2, 2, False)


def test_multiscale_native_equals_reference() -> None:
    feats = fpn(channels=16)
    boxes = [
        torch.tensor([[0.0, 0, 10, 10], [5, 5, 60, 50], [0, 0, 0, 0]], dtype=torch.float64),
        torch.tensor([[0.0, 0, 96, 64], [30, 20, 50, 40], [8, 8, 2, 12]], dtype=torch.float64),
    ]
    args = (feats, boxes, [(60, 90), (64, 96)], 3, 2, 16.0, 3.0)
    torch.testing.assert_close(ops.multiscale_roi_align(*args), ref.multiscale_roi_align(*args))


# --------------------------------------------------------------------------- paste


@pytest.mark.parametrize("case", PASTE_CASES)
@pytest.mark.parametrize("padding", [0, 1, 2])
def test_paste_native_equals_reference_and_brute(case: str, padding: int) -> None:
    boxes = torch.tensor(PASTE_CASES[case], dtype=torch.float64).reshape(-1, 4)
    masks = torch.rand(len(boxes), 6, 6, dtype=torch.float64)
    got = N.paste_masks(masks, boxes, FRAME[0], FRAME[1], padding)
    torch.testing.assert_close(got, ref.paste_masks(masks, boxes, FRAME, padding))
    torch.testing.assert_close(got, brute.paste_masks(masks, boxes, FRAME, padding))


def test_paste_native_float32_frame() -> None:
    g = torch.Generator().manual_seed(1)
    xy = torch.rand(20, 2, generator=g) * torch.tensor([160.0, 90])
    boxes = torch.cat([xy - 10, xy + torch.rand(20, 2, generator=g) * 60], 1)
    boxes[3] = torch.tensor([float("nan"), 0, 5, 5])  # pastes nothing
    masks = torch.rand(20, 28, 28, generator=g)
    got = N.paste_masks(masks, boxes, 90, 160, 1)
    want = ref.paste_masks(masks[torch.arange(20) != 3], boxes[torch.arange(20) != 3], (90, 160))
    torch.testing.assert_close(got[torch.arange(20) != 3], want, rtol=1e-5, atol=1e-6)
    assert torch.all(got[3] == 0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("threshold", [0.5, 0.25, -0.5])
def test_paste_binary_native_equals_thresholded_reference(
    dtype: torch.dtype, threshold: float
) -> None:
    g = torch.Generator().manual_seed(2)
    xy = torch.rand(30, 2, generator=g) * torch.tensor([160.0, 90])
    boxes = torch.cat([xy - 20, xy + torch.rand(30, 2, generator=g) * 60], 1).to(dtype)
    boxes[5] = torch.tensor([float("inf"), 0, 5, 5])  # pastes nothing
    masks = torch.rand(30, 28, 28, generator=g).to(dtype)
    got = N.paste_masks_binary(masks, boxes, 90, 160, 1, threshold)
    assert got.dtype == torch.bool
    # Exactly what thresholding the native float paste gives, in the masks' dtype...
    assert torch.equal(got, N.paste_masks(masks, boxes, 90, 160, 1) > threshold)
    # ...and the reference path's answer: exact in float64; lower precisions
    # round pixels near the threshold either way (bf16 steps by 1/256 at 0.5).
    want = ref.paste_masks_binary(masks, boxes, (90, 160), threshold)
    if dtype == torch.float64:
        assert torch.equal(got, want)
    else:
        assert (got != want).float().mean() < {torch.float32: 1e-4}.get(dtype, 5e-3)
    assert N.paste_masks_binary(masks[:0], boxes[:0], 90, 160, 1, 0.5).shape == (0, 90, 160)


# --------------------------------------------------------------------------- rle


@pytest.mark.parametrize("case", RLE_CASES)
def test_rle_native_equals_reference(case: str) -> None:
    masks = RLE_CASES[case]()
    chars, lengths = N.mask_to_rle(masks)
    text = chars.numpy().tobytes().decode()
    strings = []
    for n in lengths.tolist():
        strings.append(text[:n])
        text = text[n:]
    assert strings == [r["counts"] for r in ref.masks_to_rle(masks)]
    assert ops.masks_to_rle(masks.to(torch.uint8)) == ref.masks_to_rle(masks)


def test_rle_native_empty_frame_and_strided_input() -> None:
    assert (
        ops.masks_to_rle(torch.zeros(2, 0, 5, dtype=torch.bool))
        == [{"size": [0, 5], "counts": "0"}] * 2
    )
    masks = torch.rand(3, 40, 30) > 0.5
    view = masks.transpose(1, 2)  # not contiguous
    assert ops.masks_to_rle(view) == ref.masks_to_rle(view.contiguous())


# --------------------------------------------------------------------------- boxes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decode_native_equals_reference_and_brute(dtype: torch.dtype) -> None:
    boxes = torch.rand(40, 2, dtype=torch.float64) * 100
    boxes = torch.cat([boxes, boxes + torch.rand(40, 2, dtype=torch.float64) * 50], 1)
    deltas = torch.randn(40, 12, dtype=torch.float64) * 2
    deltas[0, 2] = 40.0  # past the clamp
    w = (10.0, 10.0, 5.0, 5.0)
    got = N.decode_boxes(deltas.to(dtype), boxes.to(dtype), *w, math.log(1000 / 16))
    torch.testing.assert_close(got, ref.decode_boxes(deltas.to(dtype), boxes.to(dtype), w))
    torch.testing.assert_close(
        got.double(), brute.decode(deltas, boxes, w, math.log(1000 / 16)), rtol=1e-5, atol=1e-4
    )
    assert N.decode_boxes(deltas[:0], boxes[:0], *w, 1.0).shape == (0, 3, 4)


def test_a_build_killed_midway_does_not_hang_the_next_start(tmp_path: Path) -> None:
    """torch's ``lock`` file left by a killed builder is cleared, not waited on forever."""
    built = _native._build_dir()
    cache = tmp_path / "cache"
    shutil.copytree(built, cache / built.name)  # up to date: only a load, no compile
    (cache / built.name / "lock").write_text("")
    code = "from streamseg.ops import _native; print(sorted(_native.load()))"
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache), "STREAMSEG_OPS": "native"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['cpu']"
    assert "left by an interrupted build" in out.stderr
    assert not (cache / built.name / "lock").exists()
