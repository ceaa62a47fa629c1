"""The native ops under torch.compile / torch.export / opcheck, and the fallback path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from streamseg import ops
from streamseg.ops import _native
from streamseg.ops import reference as ref
from tests.support.servers import cli_env

REPO = Path(__file__).resolve().parents[2]
N = torch.ops.streamseg
W = (10.0, 10.0, 5.0, 5.0)


def detections() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(60, 2, generator=g) * 80
    boxes = torch.cat([xy, xy + 8 + torch.rand(60, 2, generator=g) * 30], 1)
    deltas = torch.randn(60, 8, generator=g) * 0.3
    scores = torch.rand(60, generator=g)
    feats = torch.randn(1, 4, 32, 32, generator=g)
    masks = torch.rand(60, 14, 14, generator=g)
    return deltas, boxes, scores, feats, masks


def postprocess(
    deltas: torch.Tensor,
    boxes: torch.Tensor,
    scores: torch.Tensor,
    feats: torch.Tensor,
    masks: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    decoded = ops.clip_boxes(ops.decode_boxes(deltas, boxes, W)[:, 1], (120, 128))
    keep = ops.batched_nms(decoded, scores, (scores * 3).long(), 0.5)
    kept = decoded[keep]
    rois = torch.cat([torch.zeros_like(kept[:, :1]), kept], 1)
    pooled = ops.roi_align(feats, rois, (4, 4), 0.25, 2, True)
    pasted = ops.paste_masks(masks[keep], kept, (120, 128))
    return keep, pooled, pasted


def test_compile_fullgraph_through_native_ops(native: None) -> None:
    args = detections()
    want = postprocess(*args)
    torch._dynamo.reset()
    compiled = torch.compile(postprocess, fullgraph=True, backend="aot_eager")
    got = compiled(*args)
    assert got[0].tolist() == want[0].tolist()
    torch.testing.assert_close(got[1], want[1])
    torch.testing.assert_close(got[2], want[2])


def test_compile_roi_align_backward(native: None) -> None:
    feats = torch.randn(1, 3, 16, 16, requires_grad=True)
    rois = torch.tensor([[0.0, 1, 1, 30, 20], [0, 10, 5, 60, 60]])

    def loss(f: torch.Tensor) -> torch.Tensor:
        return ops.roi_align(f, rois, (3, 3), 0.25, 2, False).square().sum()

    torch._dynamo.reset()
    (want,) = torch.autograd.grad(loss(feats), feats)
    (got,) = torch.autograd.grad(
        torch.compile(loss, fullgraph=True, backend="aot_eager")(feats), feats
    )
    torch.testing.assert_close(got, want)


def test_export_through_native_ops(native: None) -> None:
    class Head(torch.nn.Module):
        def forward(self, feats: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
            return ops.roi_align(feats, rois, (2, 2), 0.5, 0, True)

    feats = torch.randn(2, 3, 10, 10)
    rois = torch.tensor([[0.0, 0, 0, 9, 9], [1, 2, 2, 15, 12]])
    exported = torch.export.export(Head(), (feats, rois))
    assert "streamseg.roi_align" in str(exported.graph)
    torch.testing.assert_close(exported.module()(feats, rois), Head()(feats, rois))


def _opcheck_cases() -> list[tuple[str, tuple[object, ...]]]:
    deltas, boxes, scores, feats, masks = detections()
    rois = torch.cat([torch.zeros(60, 1), boxes], 1)
    return [
        ("roi_align", (feats.double().requires_grad_(), rois.double(), 0.25, 3, 3, 2, False)),
        ("paste_masks", (masks, boxes, 50, 60, 1)),
        ("paste_masks_binary", (masks, boxes, 50, 60, 1, 0.5)),
        ("decode_boxes", (deltas, boxes, *W, 4.0)),
        ("nms", (boxes, scores, 0.5)),
        ("batched_nms", (boxes, scores, (scores * 4).long(), 0.5)),
        ("mask_to_rle", (masks > 0.5,)),
    ]


@pytest.mark.parametrize("case", _opcheck_cases(), ids=lambda c: c[0])
def test_opcheck(native: None, case: tuple[str, tuple[object, ...]]) -> None:
    name, args = case
    # Data-dependent output sizes (nms, rle) cannot be traced with dynamic inputs by AOT.
    utils = ("test_schema", "test_autograd_registration", "test_faketensor")
    if name in ("roi_align", "paste_masks", "paste_masks_binary", "decode_boxes"):
        utils = (*utils, "test_aot_dispatch_dynamic")
    torch.library.opcheck(getattr(N, name).default, args, test_utils=utils)


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full["PYTHONPATH"] = str(REPO)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=120,
    )


CHECK = """
    import logging, torch
    logging.basicConfig(level=logging.WARNING)
    from streamseg import ops
    from streamseg.ops import _native
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]])
    for _ in range(3):
        assert ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist() == [0, 2]
    print("STATUS", _native.status())
"""


def test_reference_forced_by_env_builds_nothing(tmp_path: Path) -> None:
    out = _run(CHECK, STREAMSEG_OPS="reference", TORCH_EXTENSIONS_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "'devices': []" in out.stdout and "'library': None" in out.stdout
    assert list(tmp_path.iterdir()) == []
    assert "WARNING" not in out.stderr


def test_failed_build_falls_back_with_one_warning(tmp_path: Path) -> None:
    env = {"CXX": str(tmp_path / "no-such-compiler"), "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    out = _run(CHECK, **env)
    assert out.returncode == 0, out.stderr
    assert "'devices': []" in out.stdout
    assert out.stderr.count("native ops unavailable, using the PyTorch reference") == 1
    assert "STREAMSEG_OPS=reference" in out.stderr  # says how to silence it


def test_native_mode_makes_a_failed_build_an_error(tmp_path: Path) -> None:
    env = {"CXX": str(tmp_path / "no-such-compiler"), "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    out = _run(CHECK, STREAMSEG_OPS="native", **env)
    assert out.returncode != 0
    assert (
        "NativeOpsError: STREAMSEG_OPS=native but the native ops could not be built" in out.stderr
    )


def test_bad_env_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSEG_OPS", "fast")
    with pytest.raises(ValueError, match="STREAMSEG_OPS='fast' is not one of auto, reference"):
        ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)


def test_reference_and_native_agree_end_to_end(native: None) -> None:
    deltas, boxes, scores, feats, masks = detections()
    keep, pooled, pasted = postprocess(deltas, boxes, scores, feats, masks)
    decoded = ref.clip_boxes(ref.decode_boxes(deltas, boxes, W)[:, 1], (120, 128))
    want_keep = ref.batched_nms(decoded, scores, (scores * 3).long(), 0.5)
    assert keep.tolist() == want_keep.tolist()
    kept = decoded[want_keep]
    rois = torch.cat([torch.zeros_like(kept[:, :1]), kept], 1)
    torch.testing.assert_close(pooled, ref.roi_align(feats, rois, (4, 4), 0.25, 2, True))
    want_pasted = ref.paste_masks(masks[want_keep], kept, (120, 128))
    torch.testing.assert_close(pasted, want_pasted, rtol=1e-5, atol=1e-6)


def test_marking_enabled_constant_imports_no_dynamo() -> None:
    """``enabled`` carries the mark torch's own decorator gives, and importing
    the ops (as every ``streamseg`` command does) leaves ``torch._dynamo``
    unloaded: about 2 s of CPU per process (the fullgraph compile above shows
    dynamo still takes ``enabled`` as a constant)."""
    import torch._dynamo

    def probe(device_type: str) -> bool:
        return True

    marked = torch._dynamo.assume_constant_result(probe)
    attrs = {k for k in vars(marked) if "dynamo" in k}
    assert attrs and all(getattr(_native.enabled, k) is True for k in attrs)
    code = (
        "import sys, streamseg.ops, streamseg.cli, streamseg.runtime.service\n"
        "assert 'torch._dynamo' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=cli_env(), timeout=120)
