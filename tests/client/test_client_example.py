"""examples/client_alerts.py runs against a real Redis holding what the sink published."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from tests.conftest import REPO
from tests.support.publishing import frames, publish
from tests.support.servers import RedisServer, cli_env


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "client_alerts.py"), *args],
        capture_output=True, text=True, timeout=120, env=cli_env(), cwd=REPO,
    )  # fmt: skip


def test_example_prints_alerts_and_frames(redis_server: RedisServer) -> None:
    items = frames("gate", range(2), alerts=True)
    publish(redis_server.url, items)
    proc = run_example("--redis", redis_server.url, "--from-start", "--count", "2")
    assert proc.returncode == 0, proc.stderr
    areas = [int(np.count_nonzero(r.instances.masks[0])) for r, _ in items]
    assert proc.stdout.splitlines() == [
        f"enter door camera=gate where=door track={seq} label=person area={areas[seq]}"
        for seq in range(2)
    ]
    proc = run_example("--redis", redis_server.url, "--from-start", "--frames", "--idle", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "gate #0: {'car': 1, 'person': 1}",
        "gate #1: {'car': 1, 'person': 1}",
    ]
