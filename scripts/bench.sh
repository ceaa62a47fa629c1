#!/usr/bin/env bash
# Rerun every benchmark the docs quote; their JSON goes into one folder and
# docs/performance.md is generated from it (scripts/perf_report.py).
#
#   scripts/bench.sh [--quick] [--only PATTERN] [--out DIR] [--doc FILE]
#
# --quick  few frames and iterations: a smoke test that every benchmark runs
#          (the document says so at the top; do not quote its figures)
# --only   run only the benchmarks whose name matches the shell PATTERN (e.g.
#          'dispatch-*') and splice their sections into the existing document
# --out    the folder for the JSON (default bench-results/<UTC time>-<mode>)
# --doc    the Markdown to write (default docs/performance.md)
#
# Each benchmark NAME leaves NAME.cmd (the command), NAME.json (its output),
# NAME.err and NAME.rc (exit code) in the folder; one that fails is reported
# as failed in the document and the others still run. The Python is
# $PYTHON, else .venv/bin/python (scripts/setup.sh). A temporary
# redis-server is started by the benchmarks that need one unless
# STREAMSEG_REDIS_URL answers. Exit code: 0 when every benchmark passed,
# 1 when any failed, 2 bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=full
only=
out=
doc=docs/performance.md
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) mode=quick ;;
    --only) only=${2:?--only needs a pattern}; shift ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --doc) doc=${2:?--doc needs a file}; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
PY=${PYTHON:-.venv/bin/python}
if ! "$PY" -c "import streamseg" 2>/dev/null; then
  echo "bench.sh: $PY cannot import streamseg: run scripts/setup.sh or set PYTHON" >&2
  exit 2
fi
out=${out:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)-$mode}
mkdir -p "$out"
: > "$out/runs.txt"
"$PY" scripts/perf_report.py meta "$out" --mode "$mode" || exit 1

failed=0
# run NAME COMMAND...: COMMAND as documented ("streamseg ..." or "python ...").
run() {
  local name=$1; shift
  # shellcheck disable=SC2053  # a pattern on purpose
  if [[ -n $only && $name != $only ]]; then return; fi
  local cmd=("$@")
  echo "$*" > "$out/$name.cmd"
  echo "$name" >> "$out/runs.txt"
  case "${cmd[0]}" in
    streamseg) cmd=("$PY" -m streamseg "${cmd[@]:1}") ;;
    python) cmd=("$PY" "${cmd[@]:1}") ;;
  esac
  echo "bench.sh: $name: $*" >&2
  "${cmd[@]}" > "$out/$name.json" 2> "$out/$name.err"
  local rc=$?
  echo "$rc" > "$out/$name.rc"
  if [[ $rc -ne 0 ]]; then
    failed=1
    echo "bench.sh: $name failed (exit $rc): see $out/$name.err" >&2
  fi
}

if [[ $mode == quick ]]; then
  ops=(--quick --repeat 1)
  iters=(--iters 1 --warmup 1)
  m2f=(--iters 1 --warmup 1)
  track=(--seeds 1 --frames 20 --cost-frames 20)
  pipeline=(--frames 8 --seconds 2 --repeat 1)
  oracle_frames=6
  publish=(--messages 2000)
  synth=(--frames 10)
else
  ops=()
  iters=()
  m2f=(--iters 5 --warmup 1)
  track=()
  pipeline=(--frames 96 --seconds 20)
  oracle_frames=300
  publish=()
  synth=()
fi

# docs/architecture.md (ops): native kernels against the PyTorch references
run ops streamseg bench ops "${ops[@]}"
# docs/backends.md, docs/mask2former.md
run model-maskrcnn-small streamseg bench model --arch maskrcnn_small --size 360x640 --batch 1 "${iters[@]}"
run model-mask2former-r50 streamseg bench model --arch mask2former_r50 --size 512x512 --batch 1 \
  "${m2f[@]}"
run model-mask2former-swin-t streamseg bench model --arch mask2former_swin_t --size 800x1333 --batch 1 \
  "${m2f[@]}"
# docs/tracking.md: quality on synthetic scenes and cost, then the demo model's detections
run track streamseg bench track "${track[@]}"
run track-detector streamseg bench track --size 320x240 --detector maskrcnn_small \
  --weights models/demo_small.pth --skip-cost "${track[@]:0:4}"  # quick: --seeds, --frames
# docs/operations.md: end-to-end against model-only, then live cameras
run pipeline streamseg bench pipeline pipeline.yaml "${pipeline[@]}"
# docs/operations.md (host path): everything but the model, 1080p
for objects in 10 50; do
  for cameras in 1 8; do
    for input in memory h264; do
      run "oracle-${objects}obj-${cameras}cam-${input}" streamseg bench pipeline \
        configs/bench_oracle.yaml --model oracle --objects "$objects" --cameras "$cameras" \
        --input "$input" --frames "$oracle_frames"
    done
  done
  # The same with the per-frame Python threads on one CPU (runtime.host_cpu)
  for input in memory h264; do
    run "oracle-${objects}obj-1cam-${input}-pinned" streamseg bench pipeline \
      configs/bench_oracle.yaml --model oracle --objects "$objects" --cameras 1 \
      --input "$input" --frames "$oracle_frames" --host-cpu last
  done
done
# docs/operations.md: JSON encoding and the Redis sink against redis-benchmark
run publish python -m streamseg.bench.publish "${publish[@]}"
# docs/ingest.md: synthetic scene rendering
run synth streamseg synth --bench "${synth[@]}"
# docs/operations.md (GPU dispatch counts): one inference of the CUDA path, counted on the CPU
run dispatch-maskrcnn-r50-b1-d10 streamseg bench dispatch --arch maskrcnn_r50_fpn --batch 1 \
  --detections 10
run dispatch-maskrcnn-r50-b1-d100 streamseg bench dispatch --arch maskrcnn_r50_fpn --batch 1 \
  --detections 100
run dispatch-maskrcnn-r50-b8-d3 streamseg bench dispatch --arch maskrcnn_r50_fpn --batch 8 \
  --detections 3
run dispatch-mask2former-r50-b1-d10 streamseg bench dispatch --arch mask2former_r50 --batch 1 \
  --detections 10 --paths triton
run dispatch-mask2former-r50-b1-d100 streamseg bench dispatch --arch mask2former_r50 --batch 1 \
  --detections 100 --paths triton

if [[ -n $only ]]; then
  "$PY" scripts/perf_report.py splice "$out" --doc "$doc" || exit 1
else
  "$PY" scripts/perf_report.py render "$out" --out "$doc" || exit 1
fi
echo "bench.sh: figures in $out, table in $doc" >&2
exit "$failed"
