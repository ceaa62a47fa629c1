#!/usr/bin/env bash
# Train mask2former_tiny for panoptic segmentation on synthetic scenes with
# stuff, from scratch on the CPU, in two stages, then evaluate it on held-out
# scenes: models/panoptic_tiny.pth and models/panoptic_tiny.eval.json.
#   1. configs/panoptic_tiny.yaml: 3-5 objects per scene, lr 2e-4 (the
#      stuff is learnt within ~500 iterations; things start to appear);
#   2. configs/panoptic_tiny_stage2.yaml: from stage 1's best checkpoint,
#      6-8 objects per scene and a lower "no object" weight, lr 1e-4, so
#      that the thing queries are not all pushed to "no object".
#
#   scripts/train_panoptic.sh            # train (or continue an interrupted run), then evaluate
#   THREADS=2 scripts/train_panoptic.sh  # more torch threads (on an idle machine)
#
# One torch thread by default: on a shared 2-core machine two threads wait for
# each other and ran several times slower. Ctrl-C / SIGTERM save
# runs/panoptic_tiny/last.pth; running it again resumes where it stopped.
# Each stage keeps its best checkpoint by PQ on the validation scene (seed
# 2001); stage 2's best is copied to
# models/panoptic_tiny.pth and evaluated on scenes never seen in training
# (seeds 3001-3003).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-1}
RUN=runs/panoptic_tiny_stage2

stage() {  # stage CONFIG RUN_DIR: train, or resume an interrupted run, or skip a finished one
  local resume=()
  [[ -f $2/model_final.pth ]] && return 0
  [[ -f $2/last.pth ]] && resume=(--resume)
  $PY -m streamseg train "$1" --threads "$THREADS" "${resume[@]}"
}
stage configs/panoptic_tiny.yaml runs/panoptic_tiny
stage configs/panoptic_tiny_stage2.yaml "$RUN"

mkdir -p models
cp "$RUN/best.pth" models/panoptic_tiny.pth
$PY -m streamseg eval --weights models/panoptic_tiny.pth --batch-size 4 \
    --data "synthetic://?seed=3001&width=256&height=192&objects=3&stuff=1&frames=40&stride=5" \
    --data "synthetic://?seed=3002&width=256&height=192&objects=4&stuff=1&frames=40&stride=5" \
    --data "synthetic://?seed=3003&width=256&height=192&objects=5&stuff=1&frames=40&stride=5" \
    | tee models/panoptic_tiny.eval.json
