"""``scripts/gpu-check.sh`` refuses, with exit 2 and a reason, where no GPU is."""

from __future__ import annotations

import os
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
        "-m gpu",
        "bench ops --device cuda",
        "maskrcnn_r50_fpn mask2former_r50",
        "--size 800x1333",
        "for batch in 1 8",
        "--precision bf16 --compare",
        "--frames host",
        "decode: dali",
        "report.json",
    ):
        assert needed in script, needed
    for path in ("tests/segment/test_preprocess.py", "tests/train/test_train_precision.py"):
        assert path in script and (REPO / path).is_file(), path
