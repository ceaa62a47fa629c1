#!/usr/bin/env bash
# Train mask2former_tiny for panoptic segmentation on synthetic scenes with
# stuff (configs/panoptic_tiny.yaml), on the CPU, then evaluate it on held-out
# scenes: models/panoptic_tiny.pth and models/panoptic_tiny.eval.json.
#
#   scripts/train_panoptic.sh            # train (or continue an interrupted run), then evaluate
#   THREADS=2 scripts/train_panoptic.sh  # more torch threads (on an idle machine)
#
# One torch thread by default: on a shared 2-core machine two threads wait for
# each other and ran several times slower. Ctrl-C / SIGTERM save
# runs/panoptic_tiny/last.pth; running it again resumes where it stopped.
# The best checkpoint by PQ on the validation scene (seed 2001) is copied to
# models/panoptic_tiny.pth and evaluated on scenes never seen in training
# (seeds 3001-3003).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-1}
RUN=runs/panoptic_tiny

resume=()
[[ -f $RUN/last.pth ]] && resume=(--resume)
$PY -m streamseg train configs/panoptic_tiny.yaml --threads "$THREADS" "${resume[@]}" "$@"

mkdir -p models
cp "$RUN/best.pth" models/panoptic_tiny.pth
$PY -m streamseg eval --weights models/panoptic_tiny.pth --batch-size 4 \
    --data "synthetic://?seed=3001&width=256&height=192&objects=3&stuff=1&frames=40&stride=5" \
    --data "synthetic://?seed=3002&width=256&height=192&objects=4&stuff=1&frames=40&stride=5" \
    --data "synthetic://?seed=3003&width=256&height=192&objects=5&stuff=1&frames=40&stride=5" \
    | tee models/panoptic_tiny.eval.json
