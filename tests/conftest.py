"""Shared fixtures: a real redis-server, a CLI runner, deterministic torch.

``scripts/test.sh`` runs the suite in several pytest-xdist workers, one test
file at a time per worker (``--dist loadfile``; see docs/testing.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Without a GPU the Triton kernels run in Triton's interpreter (tests/ops).
# Triton reads this when it is first imported (torch._dynamo imports it), so
# it is set here, before any test module is collected.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The suite's own registry rows (the test-only model maskrcnn_small_faulty),
# in this process and every one it starts (streamseg.plugins). Set before
# streamseg is first imported, which loads them.
os.environ["STREAMSEG_PLUGINS"] = "tests.support.plugins"
_repo = str(Path(__file__).resolve().parents[1])
if _repo not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_repo, os.environ.get("PYTHONPATH")]))

from tests.support.servers import RedisServer, cli_env  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# Under pytest-xdist several workers share the machine's cores: one torch
# thread each keeps them from spinning while they wait for one another.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# How scripts/test.sh spreads the suite over pytest-xdist workers
# (`--dist loadfile --no-loadscope-reorder`, docs/testing.md): the tests of
# a file run in order on one worker, so a module fixture (a compiled model, a
# clip) is built once, except the tests in SPREAD, independent runs of
# `serve` with cheap fixtures, which go to any worker one by one. The files
# that take longest go first, so that none of them starts last and keeps the
# run waiting on one worker while the others idle (totals from
# `--durations=0`); the rest keep their order.
SPREAD = ("tests/cli/test_startup_errors.py::test_serve_stops_on_the_mistake[",)
LONGEST_FIRST = (
    "tests/runtime/test_model_faults.py",
    "tests/segment/test_backend_mask2former.py",
    "tests/bench/test_bench_dispatch.py",
    "tests/models/test_detectron2.py",
    "tests/bench/test_bench_model_cli.py",
    "tests/segment/test_backend_aot.py",
    "tests/record/test_record.py",
    "tests/service/test_serve_swap.py",
    "tests/ops/test_ops_native_tracing.py",
    "tests/train/test_train_evaluate.py",
    "tests/ops/test_ops_triton.py",
    "tests/segment/test_backend_inductor.py",
    "tests/bench/test_bench_pipeline.py",
)


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::")[0]
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: each file stays whole and in its own order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile``, but with the tests in SPREAD as units of their own.

    (xdist's ``loadgroup`` would do this with marks, but it renames node ids,
    which pytest 9 no longer lets it do.)
    """
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(SPREAD) else nodeid.split("::", 1)[0]

    return FileScheduling(config, log)


@pytest.fixture(autouse=True)
def _deterministic_torch() -> None:
    torch.manual_seed(0)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server for one test (stop()/start() to simulate outages)."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def run_cli(*args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    """Run ``python -m streamseg ARGS`` and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "streamseg", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(),
        cwd=REPO,
        **kwargs,
    )


@pytest.fixture
def cli():  # type: ignore[no-untyped-def]
    return run_cli
