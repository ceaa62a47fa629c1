"""``STREAMSEG_OPS=auto``: a GPU kernel that cannot launch is replaced by the reference;
``native``: it fails at start-up (warm-up), not on a live frame.

Two real failures: a Triton kernel the interpreter cannot run (a block of
100, not a power of two) through the same guard the ops use
(``streamseg.ops._launch.launch``), and our own NMS and RLE kernels on a
device with too little shared memory, where Triton's launcher raises
``OutOfResources`` (``tests/ops/triton_fallback.py``, on the recording
driver of the launch tests, in a process without the interpreter).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg import ops
from streamseg.ops import _launch, _mode, _native
from tests.ops.triton_launch_bad import odd_block

REPO = Path(__file__).resolve().parents[2]
OPS = {
    "nms", "batched_nms", "decode_boxes", "masks_to_rle", "paste_masks", "paste_masks_binary",
    "roi_align", "roi_align_backward",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_kernel_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(_mode.ENV_VAR, raising=False)
    _launch.clear_kernel_failures()
    yield
    _launch.clear_kernel_failures()


def _odd(x: torch.Tensor) -> torch.Tensor:
    return _launch.launch("odd_block", x, lambda: odd_block(x), lambda: x * 2)


def test_auto_answers_with_the_reference_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    x = torch.rand(100)
    with caplog.at_level(logging.WARNING, logger="streamseg.ops"):
        first, second = _odd(x), _odd(x)
    assert torch.equal(first, x * 2) and torch.equal(second, x * 2)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "GPU kernel of odd_block failed on cpu float32" in warning
    assert "arange's range must be a power of 2" in warning
    assert set(ops.reference_ops()) == {"odd_block"}
    assert "power of 2" in ops.reference_ops()["odd_block"]
    assert _native.status()["reference_ops"] == ops.reference_ops()


def test_native_raises_naming_the_op_and_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_mode.ENV_VAR, "native")
    with pytest.raises(_mode.NativeOpsError, match=r"odd_block failed on cpu float32.*power of 2"):
        _odd(torch.rand(100))
    assert ops.reference_ops() == {}


def test_a_kernel_that_has_run_is_not_replaced_by_a_later_error() -> None:
    # Once a kernel has launched for a device and dtype, its errors are the
    # caller's (bad input), not a launch failure: they propagate.
    calls = iter([lambda x: x + 1, odd_block])
    x = torch.rand(100)

    def call() -> torch.Tensor:
        return _launch.launch("flaky", x, lambda: next(calls)(x), lambda: x * 2)

    assert torch.equal(call(), x + 1)
    with pytest.raises(Exception, match="power of 2"):
        call()
    assert ops.reference_ops() == {}


def test_warm_up_launches_every_kernel_under_the_interpreter() -> None:
    from streamseg.ops import triton as gpu_kernels

    gpu_kernels.warm_up(torch.device("cpu"), (torch.float32, torch.bfloat16), backward=True)
    assert ops.reference_ops() == {}
    proven = {(op, dtype) for op, _device, dtype in _launch._STATE.proven}
    assert {op for op, _ in proven} == OPS
    assert {("roi_align", "torch.bfloat16"), ("paste_masks", "torch.bfloat16")} <= proven


def _fallback_run(mode: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(STREAMSEG_OPS=mode, PYTHONPATH=str(REPO), TRITON_DEFAULT_FP_FUSION="1")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.ops.triton_fallback"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


@pytest.mark.slow
def test_kernels_that_cannot_launch_on_the_device_at_warm_up() -> None:
    procs = {mode: _fallback_run(mode) for mode in ("auto", "native")}
    results: dict[str, dict[str, Any]] = {}
    for mode, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        results[mode] = json.loads(stdout.splitlines()[-1])
    auto = results["auto"]
    # NMS (512 bytes of shared memory) and RLE (4096) cannot launch with 256;
    # the others launched; NMS answers with the reference, warned about once.
    assert set(auto["reference_ops"]) == {"nms", "batched_nms", "masks_to_rle"}, auto
    assert all("OutOfResources" in e for e in auto["reference_ops"].values())
    assert auto["launched"] == ["_decode_kernel", "_forward_kernel", "_paste_kernel"]
    assert auto["nms"] == [auto["nms_reference"]] * 2 == [[0, 2]] * 2
    assert len(auto["warnings"]) == 3
    assert any(w.startswith("streamseg GPU kernel of nms failed") for w in auto["warnings"])
    native = results["native"]
    assert native["error"].startswith(
        "NativeOpsError: STREAMSEG_OPS=native but the GPU kernel of nms failed"
    ), native
    assert "shared memory" in native["error"] and native["reference_ops"] == {}
