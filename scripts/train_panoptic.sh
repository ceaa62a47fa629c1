#!/usr/bin/env bash
# Train the panoptic demo model, mask2former_small (Mask2Former on the Mask R-CNN
# demo model's narrow ResNet-18), on synthetic scenes on the CPU, then evaluate
# it on held-out scenes: models/panoptic_small.pth,
# models/panoptic_small.eval.json (panoptic, seeds 3001-3003, as the earlier
# panoptic_tiny.eval.json) and models/panoptic_small.instance.eval.json
# (instance task, mask AP on the Mask R-CNN demo model's held-out scenes,
# seeds 1001-1002).
#   1. scripts/m2f_init_from_maskrcnn.py: the starting checkpoint, with the
#      backbone of models/demo_small.pth (as Mask2Former starts from ImageNet);
#   2. configs/panoptic_small.yaml: the first training run (see docs/mask2former.md
#      for why the earlier mask2former_tiny runs learnt no things);
#   3. configs/panoptic_small_ft.yaml: a fine-tune of its best checkpoint on
#      twice the stuff scenes, with a wider scale jitter and a lower learning
#      rate, validated on seeds 2001-2003.
#
#   scripts/train_panoptic.sh            # train (or continue an interrupted run), then evaluate
#   THREADS=2 scripts/train_panoptic.sh  # more torch threads (on an idle machine)
#
# One torch thread by default: on a shared 2-core machine two threads wait for
# each other. Ctrl-C / SIGTERM save runs/panoptic_small/last.pth; running it
# again resumes where it stopped. The fine-tune's best checkpoint by PQ on the
# validation scenes (seeds 2001-2003) is copied to models/panoptic_small.pth.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-1}
CONFIG=configs/panoptic_small.yaml
RUN=runs/panoptic_small

[[ -f $RUN/init.pth ]] || $PY scripts/m2f_init_from_maskrcnn.py "$CONFIG" models/demo_small.pth "$RUN/init.pth"
train() {  # CONFIG RUN: train, or continue an interrupted run
  local resume=()
  [[ -f $2/model_final.pth ]] && return
  [[ -f $2/last.pth ]] && resume=(--resume)
  $PY -m streamseg train "$1" --threads "$THREADS" "${resume[@]}"
}
train "$CONFIG" "$RUN"
train configs/panoptic_small_ft.yaml runs/panoptic_small_ft

mkdir -p models
cp runs/panoptic_small_ft/best.pth models/panoptic_small.pth
$PY -m streamseg eval --weights models/panoptic_small.pth --batch-size 4 \
    --data "synthetic://?seed=3001&width=256&height=192&objects=3&stuff=1&frames=40&stride=5" \
    --data "synthetic://?seed=3002&width=256&height=192&objects=4&stuff=1&frames=40&stride=5" \
    --data "synthetic://?seed=3003&width=256&height=192&objects=5&stuff=1&frames=40&stride=5" \
    | tee models/panoptic_small.eval.json
$PY -m streamseg eval --weights models/panoptic_small.pth --batch-size 4 --task instance \
    --data "synthetic://?seed=1001&width=320&height=240&objects=4&frames=60&stride=5" \
    --data "synthetic://?seed=1002&width=320&height=240&objects=5&frames=60&stride=5" \
    | tee models/panoptic_small.instance.eval.json
