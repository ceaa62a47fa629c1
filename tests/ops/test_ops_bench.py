"""``streamseg bench ops`` prints native vs reference times per op, and fails on disagreement."""

from __future__ import annotations

import json

import pytest

from streamseg.cli import main
from streamseg.ops import _native

pytestmark = pytest.mark.usefixtures("native")


@pytest.fixture
def native() -> None:
    if _native.mode() == "reference":
        pytest.skip("STREAMSEG_OPS=reference: no native kernels to time")
    assert "cpu" in _native.load(), _native.status()


def test_bench_ops_quick_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "ops", "--quick", "--repeat", "2", "--threads", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["device"] == "cpu" and report["threads"] == 1
    names = set(report["ops"])
    assert {"nms_200", "batched_nms_200", "multiscale_roi_align_50", "paste_masks_5"} <= names
    for name, entry in report["ops"].items():
        assert entry["native_ms"] > 0 and entry["reference_ms"] > 0, name
        assert entry["ratio"] == pytest.approx(entry["reference_ms"] / entry["native_ms"], 0.02)


def test_bench_ops_workloads_are_the_issue_cases() -> None:
    from streamseg.ops.bench import workloads

    full = {w.name: w.params for w in workloads()}
    assert full["nms_1000"]["boxes"] == 1000 and full["nms_5000"]["boxes"] == 5000
    assert full["multiscale_roi_align_1000"]["levels"] == 4
    assert full["paste_masks_100"]["frame"] == [720, 1280]


def test_bench_ops_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ops", "--repeat", "0"]) == 2
    assert "--repeat" in capsys.readouterr().err
