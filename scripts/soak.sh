#!/usr/bin/env bash
# A soak of the default pipeline with faults on a schedule, for a user or CI.
#
#   scripts/soak.sh --minutes 30 --out soak-out
#
# serve runs the shipped pipeline.yaml (the model in its own process) on
# RTSP cameras from GStreamer's test server, with Redis and an MQTT broker;
# it kills and restarts an RTSP server, Redis, the MQTT broker and the
# model's process, and hot-swaps the weights, in turn. It writes soak.json
# and soak.png to --out and exits 0 when nothing accepted was lost, every
# fault was recovered from and RSS stayed flat; 1 otherwise; 2 when a piece
# is missing (run scripts/setup.sh --dev first). Options: scripts/soak.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python scripts/soak.py "$@"
