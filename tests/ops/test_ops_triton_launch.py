"""Every Triton kernel goes through Triton's real launch path, for sm_80 and sm_90,
under the Triton CI installs and under Triton 3.6.0 (what CUDA torch 2.11 ships).

``tests/ops/triton_launch.py`` calls the op wrappers with the argument
kinds :mod:`streamseg.ops` passes them on a GPU; Triton binds and
specialises the arguments in its generated binder, compiles, and launches
on a recording driver (no GPU). A kernel that cannot be launched (as
``decode_boxes`` could not, its parameter ``params`` being replaced by the
binder's own dict) fails here. Triton 3.6.0 lives in ``.venv/triton-3.6.0``
(``scripts/setup.sh --dev`` installs it there, beside the venv's Triton).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ops import triton_launch

REPO = Path(__file__).resolve().parents[2]
TRITON_36 = REPO / ".venv" / "triton-3.6.0"
KERNELS = sorted((REPO / "streamseg" / "ops" / "triton").glob("*.py"))


def _start(triton_path: Path | None, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([*([str(triton_path)] if triton_path else []), str(REPO)])
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # Triton 3.9's default; silences its warning
    return subprocess.Popen(
        [sys.executable, "-m", "tests.ops.triton_launch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def _launch_both(*args: str) -> dict[str, tuple[int, list[dict[str, Any]], str]]:
    """Run the launch check under both Tritons at once: version -> (exit, rows, stderr)."""
    assert (TRITON_36 / "triton" / "__init__.py").is_file(), (
        f"Triton 3.6.0 is missing from {TRITON_36}: run scripts/setup.sh --dev"
    )
    procs = {"installed": _start(None, *args), "3.6.0": _start(TRITON_36, *args)}
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=540)
        rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        out[name] = (proc.returncode, rows, stderr[-4000:])
    assert out["3.6.0"][1][0]["triton"] == "3.6.0"
    return out


def _launched_or_called(rows: list[dict[str, Any]], arch: int) -> set[str]:
    return {
        launch["kernel"]
        for row in rows
        if row.get("arch") == arch and "case" in row
        for launch in row.get("launches", [])
    }


@pytest.mark.slow
def test_every_kernel_launches_on_both_tritons_for_sm80_and_sm90() -> None:
    params = triton_launch.kernel_parameters(KERNELS)
    sources = {k: (REPO / "streamseg/ops/triton" / k.split(":")[0]).read_text() for k in params}
    # A kernel is launched by a wrapper, or called from another kernel (a helper).
    helpers = {
        k
        for k in params
        if sources[k].count(k.split(":")[1] + "(") > 1  # its definition and a call
    }
    top = {k.split(":")[1] for k in params} - {k.split(":")[1] for k in helpers}
    for version, (code, rows, stderr) in _launch_both("--arch", "80,90").items():
        assert code == 0, (
            f"triton {version}:\n"
            + "\n".join(
                f"{r['arch']} {r['case']}: {r.get('error')}" for r in rows if not r.get("ok", True)
            )
            + stderr
        )
        assert rows[0]["shadowed"] == []
        for arch in (80, 90):
            assert _launched_or_called(rows, arch) == top, (version, arch)
            (compiled,) = [r["compiled"] for r in rows if r.get("arch") == arch and "compiled" in r]
            suppression = [c for c in compiled if c["kernel"].endswith("_suppression_kernel")]
            # NMS's IoU must not be contracted to multiply-adds (CPU parity, bit for bit).
            assert suppression and not any(c["fma"] for c in suppression)
        decode = [r for r in rows if r.get("case", "").startswith("decode_boxes")]
        assert len(decode) == 8 and all(r["ok"] for r in decode)


@pytest.mark.slow
def test_a_kernel_with_a_parameter_named_params_is_rejected() -> None:
    runs = _launch_both("--arch", "90", "--cases", "tests.ops.triton_launch_bad:cases")
    for version, (code, rows, _) in runs.items():
        assert code == 1, version
        (case,) = [r for r in rows if r.get("case") == "params_kernel"]
        assert not case["ok"]
        assert "failed to specialize argument of type: dict" in case["error"], (version, case)
        assert rows[0]["shadowed"] == ["triton_launch_bad.py:_scale_kernel: params (binder)"]


def test_no_kernel_parameter_shadows_a_name_of_tritons_launcher() -> None:
    reserved = triton_launch.reserved_names()
    # Read from Triton's generated binder and JITFunction.run, not listed by hand.
    assert {"params", "specialization", "backend"} <= set(reserved["binder"])
    assert {"grid", "warmup", "debug"} <= set(reserved["run"])
    assert {"num_warps", "enable_fp_fusion"} <= set(reserved["options"])
    params = triton_launch.kernel_parameters(KERNELS)
    assert {"box_coder.py:_decode_kernel", "nms.py:_scan_kernel"} <= set(params)
    assert triton_launch.shadowed(KERNELS) == []
    bad = Path(triton_launch.__file__).with_name("triton_launch_bad.py")
    assert triton_launch.shadowed([bad]) == ["triton_launch_bad.py:_scale_kernel: params (binder)"]
