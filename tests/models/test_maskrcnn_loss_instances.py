"""The Mask R-CNN losses cost the same whatever the number of instances (issue 32 item 3).

No loop over instances in Python: a training iteration of scenes with about
ten times more objects dispatches at most 1.1x the ops on the emulated GPU
(the CUDA path), and as many host syncs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamseg.train.datasets import open_dataset
from tests.support.servers import cli_env

REPO = Path(__file__).resolve().parents[2]


def _scene(objects: int) -> str:
    return f"synthetic://?seed=0&width=192&height=128&objects={objects}"


def _count(objects: int) -> dict:
    # A process of its own: autograd must see the emulated GPU at its first backward.
    args = [sys.executable, "-m", "streamseg", "bench", "train", "--count", "--size", "128x192",
            "--proposals", "64", "--roi-samples", "64", "--threads", "1",
            "--data", _scene(objects)]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=cli_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_fifty_instances_cost_at_most_1_1x_what_five_cost() -> None:
    few, many = open_dataset(_scene(5)), open_dataset(_scene(50))
    assert max(len(few[i].boxes) for i in range(2)) <= 5
    assert min(len(many[i].boxes) for i in range(2)) >= 30  # overlaps hide some of the 50
    small, large = _count(5), _count(50)
    assert large["losses"]["loss_box_reg"] != small["losses"]["loss_box_reg"]  # other targets
    a, b = small["per_iteration"], large["per_iteration"]
    assert b["ops"] <= 1.1 * a["ops"], (a, b)
    assert b["launches"] <= 1.1 * a["launches"], (a, b)
    assert b["syncs"] == a["syncs"], (small["syncs"], large["syncs"])
