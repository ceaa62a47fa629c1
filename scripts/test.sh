#!/usr/bin/env bash
# The test command: installs what is missing, lints, type-checks, runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k rtsp).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
.venv/bin/ruff check streamseg tests
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
