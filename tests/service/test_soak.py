"""The soak of scripts/soak.sh, short: every fault once, nothing lost, RSS flat, a plot.

``scripts/soak.sh --minutes 1`` runs the shipped pipeline (the model in its
own process) on two RTSP cameras, kills and restarts an RTSP server, Redis,
the MQTT broker and the model's process, hot-swaps the weights, then
checks what reached Redis and MQTT against what ``serve`` counted. The
30-minute run's report is in docs/operations.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serve import REPO
from tests.support.servers import cli_env

pytestmark = pytest.mark.slow

FAULTS = {"rtsp_kill", "redis_kill", "mqtt_restart", "model_kill", "hot_swap"}


def test_short_soak_loses_nothing_and_recovers_from_every_fault(tmp_path: Path) -> None:
    args = ["--minutes", "1", "--warmup", "10", "--fault-every", "9", "--sample", "3"]
    done = subprocess.run(
        ["scripts/soak.sh", *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=540,
        env=cli_env(),
        cwd=REPO,
    )
    report = json.loads((tmp_path / "soak.json").read_text())
    verdict = report["verdict"]
    assert done.returncode == 0 and verdict["passed"], (verdict["problems"], done.stdout[-3000:])
    assert {f["kind"] for f in report["faults"]} == FAULTS
    assert all(f["recovered_s"] is not None for f in report["faults"])
    assert report["serve_exit_code"] == 0
    for camera, counts in report["summary"]["cameras"].items():
        assert counts["lost"] == 0 and counts["published"] > 0, camera
        assert report["delivered"]["redis"][camera]["frames"] >= counts["published"]
        assert report["delivered"]["mqtt"][camera]["frames"] >= counts["published"]
    assert report["samples"][-1]["model"]["restarts"] >= 1  # the killed model process
    assert verdict["rss"]["serve"]["flat"]
    png = (tmp_path / "soak.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_soak_without_a_piece_says_what_is_missing_and_exits_2(tmp_path: Path) -> None:
    # A runtime install has no pytest, and this machine may lack a server:
    # the soak imports nothing of the tests and names what to install.
    code = (
        "import runpy, sys; sys.modules['pytest'] = None; "
        "sys.argv = ['soak.py', '--minutes', '0.1']; "
        "runpy.run_path('scripts/soak.py', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**cli_env(), "PATH": str(tmp_path)},
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "redis-server is not installed: run scripts/setup.sh --dev" in done.stderr
