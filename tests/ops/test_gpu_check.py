"""``scripts/gpu-check.sh`` refuses, with exit 2 and a reason, where no GPU is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_gpu_check_without_a_gpu_exits_2_and_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-check.sh"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"no CUDA GPU is visible to torch ({torch.__version__})" in done.stderr
    assert "Nothing was run" in done.stderr
    assert not (tmp_path / "out").exists()


def test_gpu_check_names_every_gpu_question() -> None:
    script = (REPO / "scripts" / "gpu-check.sh").read_text()
    for needed in (
        "tests/ops/test_ops_triton.py",
        "tests/gpu",
        "bench ops --device cuda",
        "streamseg.bench.versus parity",
        "streamseg.bench.versus timing",
        "mask2former_r50",
        "--size 800x1333",
        "--frames host",
        "--cameras 4",
        "decode: {decode}",
        "timeout -k 10",
        "GPU_CHECK_BUDGET:-450",
        "gpu_report.py finish",
        "from streamseg.bench.train import TrainBenchSpec, bench_train",
    ):
        assert needed in script, needed
    for path in ("tests/segment/test_preprocess.py", "tests/train/test_train_precision.py"):
        assert path in script and (REPO / path).is_file(), path
    # Every step has its own limit: `step NAME SECONDS COMMAND...`.
    steps = re.findall(r"^\s*step (\w+) (\d+) ", script, re.M)
    assert {n for n, _ in steps} >= {"env", "tests", "parity", "timing", "pipeline", "bench_ops"}
    assert all(0 < int(limit) <= 170 for _, limit in steps)


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_report.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_report_is_rewritten_after_every_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "env.json").write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3"}))
    (out / "tests.out").write_text("44 passed in 30.1s\n")
    assert _report("step", str(out), "tests", "0", "31", "150", "pytest", "-q").returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert report["gpu"] == "NVIDIA H100 80GB HBM3" and report["passed"] is True
    (step,) = report["steps"]
    assert step["status"] == "passed" and step["output"].startswith("44 passed")

    # A step killed at its limit keeps the partial JSON it wrote, and the run fails.
    partial = {"rows": [{"config": "fp32_b1_eager", "ratio": 0.7}], "running": "bf16_b8_inductor",
               "goals": {"fp32_b1_eager_vs_torchvision": {"ratio": 0.7, "met": True}}}  # fmt: skip
    (out / "timing.json").write_text(json.dumps(partial))
    _report("step", str(out), "timing", "124", "170", "170", "python", "-m", "x")
    _report("skip", str(out), "pipeline_dali", "DALI is not installed: No module named 'nvidia'")
    (out / "pipeline.out").write_text(json.dumps({"ratio": 0.93, "model_fps": 60.0}))
    _report("step", str(out), "pipeline", "0", "80", "90", "streamseg", "bench", "pipeline")
    report = json.loads((out / "report.json").read_text())
    by = {s["step"]: s for s in report["steps"]}
    assert by["timing"]["status"] == "timed_out" and by["timing"]["output"] == partial
    assert by["timing"]["reason"] == "killed at its limit of 170 s"
    assert by["pipeline_dali"]["status"] == "skipped" and "DALI" in by["pipeline_dali"]["reason"]
    assert report["passed"] is False and report["not_passed"] == ["timing"]
    assert report["goals"]["fp32_b1_eager_vs_torchvision"]["met"] is True
    assert report["goals"]["e2e_vs_model_only_4_cameras"] == {
        "ratio": 0.93, "goal": ">= 0.9", "met": True,
    }  # fmt: skip

    done = _report("finish", str(out))
    assert done.returncode == 1
    assert "timing" in done.stdout and "timed_out" in done.stdout and "passed: False" in done.stdout


def test_report_of_a_failed_step_keeps_its_output(tmp_path: Path) -> None:
    (tmp_path / "bench_ops.out").write_text("not json\n")
    (tmp_path / "bench_ops.err").write_text("Traceback ...\nTypeError: failed to specialize\n")
    _report("step", str(tmp_path), "bench_ops", "1", "3", "45", "streamseg", "bench", "ops")
    report = json.loads((tmp_path / "report.json").read_text())
    (step,) = report["steps"]
    assert step["status"] == "failed" and "failed to specialize" in step["output"]
    assert _report("nonsense").returncode == 2
