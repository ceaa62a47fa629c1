"""``streamseg bench ops`` prints native vs reference times per op, and fails on disagreement."""

from __future__ import annotations

import json

import pytest
import torch

from streamseg.cli import main

pytestmark = pytest.mark.usefixtures("native")


def test_bench_ops_quick_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "ops", "--quick", "--repeat", "2", "--threads", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["device"] == "cpu" and report["threads"] == 1
    assert report["gpu"] is None
    # No working torchvision on this CPU torch: said so, not silently left out.
    if report["torchvision"].startswith("not timed"):
        assert all("torchvision_ms" not in e for e in report["ops"].values())
    else:
        assert all(e["torchvision_agrees"] for e in report["ops"].values() if "torchvision_ms" in e)
    names = set(report["ops"])
    assert {"nms_200", "batched_nms_200", "multiscale_roi_align_50", "paste_masks_5"} <= names
    for name, entry in report["ops"].items():
        assert entry["native_ms"] > 0 and entry["reference_ms"] > 0, name
        assert entry["ratio"] == pytest.approx(entry["reference_ms"] / entry["native_ms"], 0.02)
        assert 1 <= entry["native_samples"] <= 2 and 1 <= entry["reference_samples"] <= 2, name
    assert report["binary_paste_mismatch_allowed"] == 1e-4


def test_bench_ops_binary_paste_tolerance_is_the_tests() -> None:
    from streamseg.bench.ops import BINARY_MISMATCH, _same_pixels

    a = torch.zeros(1, 100, 100, dtype=torch.bool)
    b = a.clone()
    assert _same_pixels(a, b) and _same_pixels(a[:0], b[:0])
    b[0, 0, 0] = True  # 1e-4 of the pixels: at the limit, not under it
    assert not _same_pixels(a, b) and BINARY_MISMATCH == 1e-4
    # The same one pixel in twice the frame: under the limit.
    assert _same_pixels(a.repeat(1, 2, 1), b.repeat(1, 2, 1) & (torch.arange(200) < 100)[:, None])
    assert not _same_pixels(a, b[:, :50])


def test_bench_ops_workloads_are_the_issue_cases() -> None:
    from streamseg.bench.ops import workloads

    full = {w.name: w.params for w in workloads()}
    assert full["nms_1000"]["boxes"] == 1000 and full["nms_5000"]["boxes"] == 5000
    assert full["multiscale_roi_align_1000"]["levels"] == 4
    assert full["paste_masks_100"]["frame"] == [720, 1280]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--repeat", "0"], "--repeat"),
        (["--device", "tpu"], "expected cpu, cuda or cuda:N"),
        (["--device", "bogus:x"], "expected cpu, cuda or cuda:N"),
    ],
)
def test_bench_ops_bad_arguments(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["bench", "ops", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_bench_ops_cuda_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ops", "--device", "cuda"]) == 2
    assert "sees no CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bench_ops_quick_on_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ops", "--quick", "--repeat", "2", "--device", "cuda"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"].startswith("cuda") and report["gpu"]
    assert all(e["native_ms"] > 0 for e in report["ops"].values())
