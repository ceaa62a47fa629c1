"""The Triton kernels (the CUDA path) against the C++ kernels and the reference.

Every test calls ``torch.ops.streamseg_triton.*``, the ops CUDA tensors are
dispatched to, so the launch wrappers' grid and block arithmetic runs too.
Without a GPU they run in Triton's interpreter on CPU tensors (see
``conftest.py``); on a GPU the same tests run the compiled kernels on CUDA
tensors (``scripts/gpu-check.sh``). NMS and RLE must agree exactly, the
float outputs to float tolerance. Cases are the CPU kernel tests' own.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from streamseg.ops import reference as ref
from tests.ops import brute
from tests.ops.test_ops_nms import CASES as NMS_CASES
from tests.ops.test_ops_nms import clustered_boxes
from tests.ops.test_ops_paste import BOX_CASES as PASTE_CASES
from tests.ops.test_ops_paste import FRAME
from tests.ops.test_ops_rle import CASES as RLE_CASES
from tests.ops.test_ops_roi_align import ROI_CASES, fpn

pytestmark = pytest.mark.usefixtures("native")

T = torch.ops.streamseg_triton
N = torch.ops.streamseg
THRESHOLDS = (0.0, 0.5, 0.9)


def on(device: torch.device, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.to(device) for t in tensors]


# --------------------------------------------------------------------------- nms


@pytest.mark.parametrize("case", NMS_CASES)
def test_nms_equals_cpp_and_reference(gpu_device: torch.device, case: str) -> None:
    boxes, scores = NMS_CASES[case]
    for dtype, thresholds in ((torch.float32, THRESHOLDS), (torch.float64, (0.5,))):
        b, s = boxes.to(dtype), scores.to(dtype)
        for thr in thresholds:
            got = T.nms(*on(gpu_device, b, s), thr)
            assert got.dtype == torch.int64
            assert got.tolist() == N.nms(b, s, thr).tolist() == ref.nms(b, s, thr).tolist()


@pytest.mark.parametrize("classes", [1, 3, 80])
def test_batched_nms_equals_cpp_many_classes(gpu_device: torch.device, classes: int) -> None:
    boxes, scores = clustered_boxes(150, seed=classes)
    idxs = torch.randint(0, classes, (150,), generator=torch.Generator().manual_seed(classes))
    got = T.batched_nms(*on(gpu_device, boxes, scores, idxs), 0.5)
    assert got.tolist() == N.batched_nms(boxes, scores, idxs, 0.5).tolist()
    assert got.tolist() == brute.batched_nms(boxes, scores, idxs, 0.5)


def test_nms_score_ties_keep_input_order(gpu_device: torch.device) -> None:
    # 70 boxes (two words) with equal scores: input order decides.
    boxes = torch.tensor([[float(i), 0.0, i + 10.0, 10.0] for i in range(70)])
    scores = torch.full((70,), 0.5)
    got = T.nms(*on(gpu_device, boxes, scores), 0.5)
    assert got.tolist() == N.nms(boxes, scores, 0.5).tolist() == list(range(0, 70, 4))


@st.composite
def box_sets(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    n = draw(st.integers(0, 70))
    # Coarse coordinates and scores: exact IoU ties with the threshold and equal scores.
    coords = draw(st.lists(st.integers(-4, 40), min_size=4 * n, max_size=4 * n))
    boxes = torch.tensor(coords, dtype=torch.float32).reshape(n, 4) / 2
    boxes[:, 2:] += boxes[:, :2].abs()
    scores = torch.tensor(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))) / 5
    idxs = torch.tensor(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    return boxes, scores.float(), idxs.long(), draw(st.sampled_from([0.0, 0.25, 0.5, 0.7]))


@settings(max_examples=8, deadline=None)
@given(case=box_sets())
def test_nms_property_random_boxes(
    gpu_device: torch.device, case: tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]
) -> None:
    boxes, scores, idxs, thr = case
    got = T.batched_nms(*on(gpu_device, boxes, scores, idxs), thr).tolist()
    assert got == N.batched_nms(boxes, scores, idxs.reshape(-1), thr).tolist()
    assert T.nms(*on(gpu_device, boxes, scores), thr).tolist() == N.nms(boxes, scores, thr).tolist()


# --------------------------------------------------------------------------- roi_align


@pytest.mark.parametrize("case", ROI_CASES)
def test_roi_align_equals_cpp_and_reference(gpu_device: torch.device, case: str) -> None:
    x = torch.randn(2, 3, 9, 11, dtype=torch.float64)
    rois = torch.tensor(ROI_CASES[case], dtype=torch.float64)
    for sampling_ratio in (0, 2):
        for aligned in (False, True):
            args = (0.5, 3, 4, sampling_ratio, aligned)
            got = T.roi_align(*on(gpu_device, x, rois), *args).cpu()
            torch.testing.assert_close(got, N.roi_align(x, rois, *args))
            want = ref.roi_align(x, rois, (3, 4), 0.5, sampling_ratio, aligned)
            torch.testing.assert_close(got, want)


def test_roi_align_backward_equals_cpp(gpu_device: torch.device) -> None:
    x = torch.randn(2, 3, 6, 7, dtype=torch.float64)
    rois = torch.tensor(
        [[0, 0.0, 0.0, 5.0, 4.0], [1, 1.5, 0.5, 12.0, 11.0], [0, -1.0, 2.0, 3.0, 3.5]],
        dtype=torch.float64,
    )
    g = torch.randn(3, 3, 2, 3, dtype=torch.float64)
    for sampling_ratio, aligned in ((0, False), (3, True)):
        args = (0.5, 2, 3, sampling_ratio, aligned)
        xt = x.to(gpu_device).requires_grad_()
        (got,) = torch.autograd.grad(
            T.roi_align(xt, rois.to(gpu_device), *args), xt, g.to(gpu_device)
        )
        xc = x.clone().requires_grad_()
        (want,) = torch.autograd.grad(N.roi_align(xc, rois, *args), xc, g)
        torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_roi_align_low_precision(gpu_device: torch.device, dtype: torch.dtype) -> None:
    x = torch.randn(2, 16, 9, 11)
    rois = torch.tensor(ROI_CASES["large"] + ROI_CASES["border"])
    got = T.roi_align(*on(gpu_device, x.to(dtype), rois.to(dtype)), 0.5, 2, 2, 0, True)
    assert got.dtype == dtype
    want = ref.roi_align(x.to(dtype).float(), rois.to(dtype).float(), (2, 2), 0.5, 0, True)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.cpu().float(), want, rtol=tol, atol=tol)


def test_multiscale_roi_align_through_the_triton_op(gpu_device: torch.device) -> None:
    # The public multi-level op is the reference's level mapping over ``align``;
    # on CUDA ``align`` is the Triton op: the same composition, run here.
    feats = fpn(channels=4)
    boxes = [
        torch.tensor([[0.0, 0, 10, 10], [5, 5, 60, 50], [0, 0, 0, 0]], dtype=torch.float64),
        torch.tensor([[0.0, 0, 96, 64], [30, 20, 50, 40], [8, 8, 2, 12]], dtype=torch.float64),
    ]

    def align(
        x: torch.Tensor, rois: torch.Tensor, size: tuple[int, int], *rest: object
    ) -> torch.Tensor:
        scale, sampling_ratio, aligned = rest
        return T.roi_align(x, rois, scale, size[0], size[1], sampling_ratio, aligned)

    args = (
        [f.to(gpu_device) for f in feats],
        [b.to(gpu_device) for b in boxes],
        [(60, 90), (64, 96)],
        3,
        2,
    )
    got = ref.multiscale_roi_align(*args, 16.0, 3.0, align=align)
    want = ref.multiscale_roi_align(feats, boxes, [(60, 90), (64, 96)], 3, 2, 16.0, 3.0)
    torch.testing.assert_close(got.cpu(), want)


# --------------------------------------------------------------------------- paste


@pytest.mark.parametrize("case", PASTE_CASES)
def test_paste_equals_cpp_and_reference(gpu_device: torch.device, case: str) -> None:
    boxes = torch.tensor(PASTE_CASES[case], dtype=torch.float64).reshape(-1, 4)
    masks = torch.rand(len(boxes), 6, 6, dtype=torch.float64)
    for padding in (0, 1, 2):
        got = T.paste_masks(*on(gpu_device, masks, boxes), *FRAME, padding).cpu()
        torch.testing.assert_close(got, N.paste_masks(masks, boxes, *FRAME, padding))
        torch.testing.assert_close(got, ref.paste_masks(masks, boxes, FRAME, padding))
    for thr in (0.5, 0.0, -0.1):
        got = T.paste_masks_binary(*on(gpu_device, masks, boxes), *FRAME, 1, thr).cpu()
        assert torch.equal(got, N.paste_masks_binary(masks, boxes, *FRAME, 1, thr))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_paste_mask_head_sizes_and_bad_boxes(gpu_device: torch.device, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(1)
    xy = torch.rand(8, 2, generator=g) * torch.tensor([60.0, 30])
    boxes = torch.cat([xy - 10, xy + torch.rand(8, 2, generator=g) * 30], 1)
    boxes[3] = torch.tensor([float("nan"), 0, 5, 5])  # pastes nothing
    boxes[5] = torch.tensor([0.0, 0, float("inf"), 5])
    masks = torch.rand(8, 28, 28, generator=g)
    b, m = boxes.to(dtype), masks.to(dtype)
    got = T.paste_masks(*on(gpu_device, m, b), 30, 60, 1).cpu()
    assert got.dtype == dtype and torch.all(got[3] == 0) and torch.all(got[5] == 0)
    keep = torch.tensor([i not in (3, 5) for i in range(8)])
    want = ref.paste_masks(m[keep], b[keep], (30, 60))
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got[keep].float(), want.float(), rtol=tol, atol=tol)
    binary = T.paste_masks_binary(*on(gpu_device, m, b), 30, 60, 1, 0.5).cpu()
    assert torch.equal(binary, got > 0.5)


@pytest.mark.parametrize("frame", [(2160, 64), (48, 3840)], ids=["4k_tall", "4k_wide"])
def test_paste_4k_coordinates(gpu_device: torch.device, frame: tuple[int, int]) -> None:
    # 4K coordinates on each axis (a whole 4K frame is 4080 tiles per mask,
    # minutes in the interpreter: test_paste_4k_frame runs it on a GPU).
    h, w = frame
    boxes = torch.tensor([[w - 40.0, h - 40, w - 2, h - 1], [w + 100.0, 10, w + 200, 90]])
    masks = torch.rand(2, 28, 28, generator=torch.Generator().manual_seed(3))
    got = T.paste_masks_binary(*on(gpu_device, masks, boxes), h, w, 1, 0.5).cpu()
    assert torch.equal(got, N.paste_masks_binary(masks, boxes, h, w, 1, 0.5))
    assert got[0].any() and not got[1].any()


@pytest.mark.gpu
def test_paste_4k_frame(gpu_device: torch.device) -> None:
    if gpu_device.type != "cuda":
        pytest.skip("a whole 4K frame takes minutes in the interpreter; needs a GPU")
    g = torch.Generator().manual_seed(3)
    xy = torch.rand(100, 2, generator=g) * torch.tensor([3840.0, 2160])
    boxes = torch.cat([xy - 100, xy + torch.rand(100, 2, generator=g) * 400], 1)
    masks = torch.rand(100, 28, 28, generator=g)
    got = T.paste_masks(*on(gpu_device, masks, boxes), 2160, 3840, 1).cpu()
    torch.testing.assert_close(got, N.paste_masks(masks, boxes, 2160, 3840, 1))


# --------------------------------------------------------------------------- rle


@pytest.mark.parametrize("case", RLE_CASES)
def test_rle_equals_cpp_and_reference(gpu_device: torch.device, case: str) -> None:
    from streamseg.ops.triton import rle

    masks = RLE_CASES[case]()
    got = rle.masks_to_rle(masks.to(gpu_device))
    assert got == ref.masks_to_rle(masks)
    chars, lengths = N.mask_to_rle(masks)
    assert [r["counts"] for r in got] == _split(chars, lengths)
    assert rle.masks_to_rle(masks.to(torch.uint8).to(gpu_device)) == got


def _split(chars: torch.Tensor, lengths: torch.Tensor) -> list[str]:
    text = chars.numpy().tobytes().decode()
    out, start = [], 0
    for n in lengths.tolist():
        out.append(text[start : start + n])
        start += n
    return out


def test_rle_empty_frame_and_many_masks(gpu_device: torch.device) -> None:
    from streamseg.ops.triton import rle

    assert (
        rle.masks_to_rle(torch.zeros(2, 0, 3, dtype=torch.bool, device=gpu_device))
        == [{"size": [0, 3], "counts": "0"}] * 2
    )
    masks = torch.rand(40, 9, 70, generator=torch.Generator().manual_seed(4)) > 0.6
    assert rle.masks_to_rle(masks.to(gpu_device)) == ref.masks_to_rle(masks)


# --------------------------------------------------------------------------- decode


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decode_boxes_equals_cpp(gpu_device: torch.device, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(5)
    xy = torch.rand(300, 2, generator=g) * 100
    boxes = torch.cat([xy, xy + torch.rand(300, 2, generator=g) * 50], 1).to(dtype)
    deltas = (torch.randn(300, 4 * 5, generator=g) * 3).to(dtype)  # some dw, dh past the clamp
    args = (10.0, 10.0, 5.0, 5.0, 4.135)
    got = T.decode_boxes(*on(gpu_device, deltas, boxes), *args).cpu()
    torch.testing.assert_close(got, N.decode_boxes(deltas, boxes, *args))
    torch.testing.assert_close(got, ref.decode_boxes(deltas, boxes, args[:4], args[4]))
    assert T.decode_boxes(*on(gpu_device, deltas[:0], boxes[:0]), *args).shape == (0, 5, 4)


# --------------------------------------------------------------------------- tracing


def test_fakes_give_shapes_without_running(gpu_device: torch.device) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        boxes = torch.empty(50, 4, device=gpu_device)
        scores = torch.empty(50, device=gpu_device)
        keep = T.batched_nms(boxes, scores, torch.empty(50, dtype=torch.int64), 0.5)
        assert keep.dtype == torch.int64 and not isinstance(keep.shape[0], int)
        feats = torch.empty(2, 8, 20, 30, dtype=torch.bfloat16, device=gpu_device)
        pooled = T.roi_align(feats, torch.empty(7, 5, device=gpu_device), 0.25, 7, 7, 2, True)
        assert pooled.shape == (7, 8, 7, 7) and pooled.dtype == torch.bfloat16
        masks = torch.empty(5, 28, 28, device=gpu_device)
        assert T.paste_masks_binary(masks, boxes[:5], 720, 1280, 1, 0.5).dtype == torch.bool
        flags = T.rle_boundaries(torch.empty(3, 9, 7, dtype=torch.bool, device=gpu_device))
        assert flags.shape == (3, 63)
        deltas = torch.empty(50, 12, device=gpu_device)
        assert T.decode_boxes(deltas, boxes, 1.0, 1.0, 1.0, 1.0, 4.0).shape == (50, 3, 4)


def test_export_keeps_the_triton_ops(gpu_device: torch.device) -> None:
    class Head(torch.nn.Module):
        def forward(self, feats: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
            pooled = T.roi_align(feats, rois, 0.5, 2, 2, 0, True)
            return T.paste_masks(pooled.mean(1), rois[:, 1:], 12, 16, 1)

    feats = torch.randn(2, 3, 10, 10, device=gpu_device)
    rois = torch.tensor([[0.0, 0, 0, 9, 9], [1, 2, 2, 15, 12]], device=gpu_device)
    exported = torch.export.export(Head(), (feats, rois))
    graph = str(exported.graph)
    assert "streamseg_triton.roi_align" in graph and "streamseg_triton.paste_masks" in graph
    torch.testing.assert_close(exported.module()(feats, rois), Head()(feats, rois))
