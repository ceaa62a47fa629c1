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
# The native ops' first build (about 45 CPU-seconds, ninja on every core) runs
# beside mypy, which keeps one core busy for as long; pytest then finds it
# built. A build that fails is reported by the tests that need it.
.venv/bin/python -c "from streamseg.ops import _native; _native.load()" >/dev/null 2>&1 &
native=$!
.venv/bin/ruff check streamseg tests
.venv/bin/mypy
wait "$native" || true
exec .venv/bin/python -m pytest -n "${STREAMSEG_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder "$@"
