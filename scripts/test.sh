#!/usr/bin/env bash
# The test command: installs what is missing, lints, type-checks, runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k rtsp).
#
# pytest runs in $STREAMSEG_TEST_WORKERS pytest-xdist workers (default 4, more
# than CI's 2 cores: many tests wait on a subprocess, a server or a clock).
# A test file's tests stay together on one worker, so its module fixtures (a
# compiled model, a clip) are built once; tests/conftest.py groups them and
# orders the longest first (docs/testing.md). STREAMSEG_TEST_WORKERS=0 runs
# every test in this one process, as plain pytest does.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check streamseg tests
.venv/bin/mypy
exec .venv/bin/python -m pytest -n "${STREAMSEG_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder "$@"
