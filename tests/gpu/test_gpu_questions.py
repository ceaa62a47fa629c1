"""What only a GPU can answer, run by ``scripts/gpu-check.sh`` (``-m gpu``).

Each test names the question it answers; all skip where torch sees no CUDA
device. The Triton kernels' GPU tests are tests/ops/test_ops_triton.py (the
same file CI runs in Triton's interpreter).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from streamseg.segment import Segmenter
from streamseg.types import Frame, FrameBatch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DEMO = Path(__file__).resolve().parents[2] / "models" / "demo_small.pth"


def test_dali_nvdec_h264_matches_pyav(tmp_path: Path) -> None:
    """Does NVDEC (DALI on the GPU) decode H.264 as PyAV does, frame for frame?"""
    from streamseg.ingest.dali import DaliDecoder
    from streamseg.ingest.decoders import PyAVDecoder
    from tests.ingest.test_dali import decode_packets
    from tests.support.video import write_h264

    clip = write_h264(tmp_path / "clip.mp4", frames=45, width=320, height=240)
    ours = decode_packets(clip, lambda s: DaliDecoder(stream=s, device="cuda"))
    ref = decode_packets(clip, lambda s: PyAVDecoder(stream=s))
    assert len(ours) == len(ref) == 45
    assert [t for t, _ in ours] == pytest.approx([t for t, _ in ref])
    for (_, a), (_, b) in zip(ours, ref, strict=True):
        assert a.device.type == "cuda" and a.dtype == torch.uint8 and a.shape == b.shape
        diff = (a.cpu().int() - b.int()).abs().float()
        assert diff.mean() < 2.0  # same YUV; the YUV->RGB conversions differ slightly
        assert torch.quantile(diff.flatten(), 0.99) < 16


def _scene_batch(device: str) -> FrameBatch:
    from streamseg.synthetic.scene import SyntheticScene

    scene = SyntheticScene(seed=1001, height=240, width=320, num_objects=5)
    return FrameBatch(
        tuple(
            Frame("cam", i, f.time, 0.0, f.image.to(device))
            for i, f in enumerate(scene.frame(k) for k in (0, 7))
        )
    )


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_low_precision_on_cuda_finds_what_fp32_finds(precision: str) -> None:
    """Do bf16 and fp16 on the GPU detect what fp32 detects (boxes within 4 px)?"""
    batch = _scene_batch("cuda")
    full = Segmenter(arch="maskrcnn_small", weights=str(DEMO), device="cuda").segment(batch)
    low = Segmenter(arch="maskrcnn_small", weights=str(DEMO), device="cuda", precision=precision)
    for a, b in zip(full, low.segment(batch), strict=True):
        assert b.boxes.dtype == torch.float32 and b.masks is not None
        sure = a.scores > 0.7
        assert int(sure.sum()) >= 2
        for box, label in zip(a.boxes[sure], a.labels[sure], strict=True):
            gap = (b.boxes - box).abs().max(dim=1).values
            j = int(gap.argmin())
            assert float(gap[j]) < 4.0 and int(b.labels[j]) == int(label), (precision, box)


def test_cuda_fp32_matches_cpu() -> None:
    """Does the model on the GPU (Triton post-processing) give the CPU's detections?"""
    cpu = Segmenter(arch="maskrcnn_small", weights=str(DEMO)).segment(_scene_batch("cpu"))
    gpu = Segmenter(arch="maskrcnn_small", weights=str(DEMO), device="cuda").segment(
        _scene_batch("cuda")
    )
    for a, b in zip(cpu, gpu, strict=True):
        sure = a.scores > 0.5
        for box in a.boxes[sure]:
            assert float((b.boxes.cpu() - box).abs().max(dim=1).values.min()) < 1.0


def test_tf32_matmul_error_is_bounded() -> None:
    """How far do TF32 matmuls and convs move from fp32 (the precision serve allows)?"""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(512, 512, device="cuda", generator=g)
    b = torch.randn(512, 512, device="cuda", generator=g)
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        exact = a @ b
        torch.backends.cuda.matmul.allow_tf32 = True
        fast = a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    rel = float((fast - exact).norm() / exact.norm())
    assert rel < 5e-3, rel
