#!/usr/bin/env bash
# Reproduce models/demo_small.pth, the default pipeline's model: maskrcnn_small
# trained from scratch on synthetic scenes (configs/demo_small.yaml), on the CPU.
#
#   scripts/train_demo.sh            # train (or continue an interrupted run), then evaluate
#
# Interrupt it at any time (Ctrl-C / SIGTERM save runs/demo_small/last.pth);
# running it again resumes exactly where it stopped. The best checkpoint by
# mask AP on a held-out scene is copied to models/demo_small.pth and evaluated
# on two further held-out scenes into models/demo_small.eval.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-1}
RUN=runs/demo_small

resume=()
[[ -f $RUN/last.pth ]] && resume=(--resume)
$PY -m streamseg train configs/demo_small.yaml --threads "$THREADS" "${resume[@]}" "$@"

mkdir -p models
cp "$RUN/best.pth" models/demo_small.pth
$PY -m streamseg eval --weights models/demo_small.pth \
    --data "synthetic://?seed=1001&width=320&height=240&objects=4&frames=60&stride=5" \
    --data "synthetic://?seed=1002&width=320&height=240&objects=5&frames=60&stride=5" \
    | tee models/demo_small.eval.json
