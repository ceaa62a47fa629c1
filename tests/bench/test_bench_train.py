"""``streamseg bench train``: the phases of a training iteration timed, and counted on
the emulated GPU within the budgets of issue 32 (at most 10 host syncs per iteration)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from streamseg.cli import main
from tests.support.servers import cli_env
from tests.support.threads import one_thread

REPO = Path(__file__).resolve().parents[2]

SYNCS_PER_ITERATION = 10
PHASES = ("data", "forward", "backward", "optimizer", "total")


def _bench(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    with one_thread():
        assert main(["bench", "train", "--size", "64x96", "--threads", "1", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_bench_train_times_each_phase(capsys: pytest.CaptureFixture[str]) -> None:
    report = _bench(capsys, "--iters", "2", "--warmup", "1", "--roi-samples", "32")
    assert report["benchmark"] == "train" and report["arch"] == "maskrcnn_small"
    assert report["input_size"] == [64, 96] and report["images_per_iteration"] == 2
    for phase in PHASES:
        assert report["ms"][phase] > 0 and report["cpu_ms"][phase] >= 0, phase
    parts = sum(report["ms"][p] for p in PHASES[:-1])
    assert report["ms"]["total"] == pytest.approx(parts, rel=0.05, abs=0.5)
    assert report["images_per_s"] > 0 and len(report["iterations_ms"]) == 2
    assert report["peak_memory_mb"] > 50  # a process with torch loaded
    assert set(report["losses"]) >= {"loss_classifier", "loss_mask", "loss_objectness"}
    assert all(math.isfinite(v) for v in report["losses"].values())


def test_bench_train_knobs_reach_the_step(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--iters", "1", "--warmup", "0", "--roi-samples", "16", "--accumulation", "2",
            "--precision", "bf16", "--channels-last", "--freeze", "2", "--batch", "1"]  # fmt: skip
    report = _bench(capsys, *args)
    assert (report["precision"], report["channels_last"], report["freeze"]) == ("bf16", True, 2)
    assert report["images_per_iteration"] == 2 and report["roi_samples"] == 16
    assert all(math.isfinite(v) for v in report["losses"].values())


def test_bench_train_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "train", "--batch", "0"]) == 2
    assert "--batch" in capsys.readouterr().err
    assert main(["bench", "train", "--data", "/no/such.json"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_counted_iteration_within_the_sync_budget() -> None:
    # A process of its own: autograd sizes its device queues at the process's first
    # backward pass, which must see the emulated GPU (bench.emulated.emulated_gpu).
    args = [sys.executable, "-m", "streamseg", "bench", "train", "--arch", "maskrcnn_r50_fpn",
            "--count", "--size", "64x96", "--proposals", "64", "--threads", "1"]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=cli_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    total, phases = report["per_iteration"], report["phases"]
    assert total["syncs"] <= SYNCS_PER_ITERATION, report["syncs"]
    assert sum(report["syncs"].values()) == total["syncs"]
    # Every sync names the line that makes it; none in the backward pass.
    assert all(" at streamseg." in site for site in report["syncs"]), report["syncs"]
    assert phases["backward"]["syncs"] == 0 and phases["optimizer"]["syncs"] == 0
    # Autograd's backward pass (its own thread) is counted.
    assert phases["backward"]["ops"] > 0.25 * phases["forward"]["ops"]
    assert phases["optimizer"]["launches"] > 0
    assert sum(p["ops"] for p in phases.values()) == total["ops"]
    memory = report["memory_mb"]
    assert 0 < memory["model_and_optimizer"] < memory["peak"]


@pytest.mark.slow
def test_two_processes_against_one_with_twice_the_accumulation() -> None:
    args = [sys.executable, "-m", "streamseg", "bench", "train", "--processes", "2",
            "--size", "64x96", "--roi-samples", "32", "--iters", "1", "--warmup", "0"]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=cli_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    one, two = report["one_process"], report["two_processes"]
    assert (one["processes"], one["accumulation"]) == (1, 2)
    assert (two["processes"], two["accumulation"]) == (2, 1)
    assert one["images_per_iteration"] == two["images_per_iteration"] == 4
    assert report["scaling_efficiency"] == pytest.approx(
        two["images_per_s"] / (2 * one["images_per_s"]), rel=1e-2
    )
    assert 0 < report["cpu_efficiency"] < 2
