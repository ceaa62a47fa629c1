#!/usr/bin/env bash
# One command for the day a GPU is lent: every check that needs a real NVIDIA
# GPU, in one run of at most 8 minutes, into one JSON report.
#
#   scripts/gpu-check.sh [OUT_DIR]        (default: gpu-check-<UTC time>)
#
# Steps, most important first, each under its own time limit (`timeout`)
# and within the run's budget (GPU_CHECK_BUDGET seconds, default 450: with
# the wheels' install of .device/run.sh, 8 minutes on a bare machine). A step
# that finds too little of the budget left is skipped, with the reason.
#   env            the GPU, versions, which optional parts (DALI, TensorRT,
#                  torchvision) are installed
#   tests          the Triton kernels compiled and run on the GPU against the
#                  C++ kernels and the reference (tests/ops/test_ops_triton.py,
#                  the cases CI runs in Triton's interpreter), the tests marked
#                  gpu (tests/gpu: bf16/fp16 vs fp32, cuda vs cpu, TF32 error,
#                  DALI NVDEC when DALI is there, Mask2Former's panoptic and
#                  semantic post-processing on cuda vs cpu), preprocess on cuda,
#                  TF32 flags
#   parity         streamseg's R50-FPN vs torchvision's maskrcnn_resnet50_fpn,
#                  same weights, same 1080p frames: fp32 with TF32 off must
#                  give the same detections, bf16 must find what fp32 finds
#                  (python -m streamseg.bench.versus parity)
#   timing         the two side by side, alternated in one process: batch 1
#                  and 8, fp32 and bf16, eager, then inductor as time allows
#                  (python -m streamseg.bench.versus timing)
#   clip, pipeline four 1080p H.264 cameras (a clip made here from the
#                  synthetic scene), model only vs end to end (bench pipeline)
#   bench_ops      our kernels vs the reference and torchvision's CUDA ops
#   models         bench model: Mask2Former R50 bf16, R50-FPN batch 8 bf16
#                  with the frames' host-to-device copy
#   train          bench train: a training step of R50-FPN at 800x1333, batch 4,
#                  fp32 (TF32) then bf16 autocast with channels_last: per phase
#                  ms, images/s, max_memory_allocated (streamseg.bench.train)
#   pipeline_dali, tensorrt   only where DALI / Torch-TensorRT are installed
#
# OUT_DIR/report.json is rewritten after every step (scripts/gpu_report.py):
# each step's status (passed, failed, timed_out, skipped and why), seconds,
# limit, command and output (its JSON; partial JSON of a step killed at its
# limit), and the goals' figures. OUT_DIR/NAME.out/.err hold the raw output.
# Exit codes: 0 every step passed or was skipped, 1 a step failed or timed
# out, 2 no CUDA GPU here.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  torch_version=$("$PY" -c "import torch; print(torch.__version__)" 2>/dev/null || echo "not importable")
  echo "gpu-check: no CUDA GPU is visible to torch ($torch_version); this script only runs on a" \
       "machine with an NVIDIA GPU and a CUDA build of torch. Nothing was run." >&2
  exit 2
fi

OUT=${1:-gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
: >"$OUT/steps.jsonl"
BUDGET=${GPU_CHECK_BUDGET:-450}
START=$SECONDS
# Compiled graphs are cached (inductor's FX graph cache, Triton's kernels) and
# reused by later steps that compile the same shapes.
export TORCHINDUCTOR_FX_GRAPH_CACHE=1 PYTHONUNBUFFERED=1
echo "gpu-check: writing to $OUT (budget $BUDGET s)"

report() { "$PY" scripts/gpu_report.py "$@" >/dev/null; }

# step NAME LIMIT COMMAND...: run under `timeout` (LIMIT, or what is left of
# the budget if less), keep stdout as NAME.out and stderr as NAME.err, and
# rewrite the report.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - (SECONDS - START)))
  if [ "$left" -lt 20 ]; then
    report skip "$OUT" "$name" "no time left: ${left} s of the ${BUDGET} s budget"
    echo "gpu-check: $name skipped (${left} s left)"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "gpu-check: $name (limit ${limit} s): $*"
  local started=$SECONDS
  timeout -k 10 "$limit" "$@" >"$OUT/$name.out" 2> >(tee "$OUT/$name.err" >&2)
  local rc=$?
  report step "$OUT" "$name" "$rc" "$((SECONDS - started))" "$limit" "$@"
  echo "gpu-check: $name exit $rc after $((SECONDS - started)) s"
}

# has MODULE: whether Python imports it; why_not MODULE: the import error.
has() { "$PY" -c "import $1" 2>/dev/null; }
why_not() { "$PY" -c "import $1" 2>&1 | tail -1; }

step env 30 "$PY" -c '
import json, platform, sys, torch, triton
from streamseg.ops import _native
def version(name):
    try:
        module = __import__(name)
    except Exception as exc:
        return f"not installed: {exc}"
    return getattr(module, "__version__", "installed")
env = {"gpu": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
       "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
       "python": platform.python_version(), "torchvision": version("torchvision"),
       "dali": version("nvidia.dali"), "tensorrt": version("torch_tensorrt"),
       "streamseg_ops": _native.mode(), "gpu_kernels": _native.load_gpu()}
json.dump(env, open(sys.argv[1] + "/env.json", "w"), indent=1)
print(json.dumps(env))
' "$OUT"

tests=(tests/ops/test_ops_triton.py tests/bench/test_bench_ops.py tests/segment/test_preprocess.py
       tests/train/test_train_precision.py tests/gpu)
deselect=()
has nvidia.dali || deselect=(--deselect tests/gpu/test_gpu_questions.py::test_dali_nvdec_h264_matches_pyav)
# The tests marked gpu (-m gpu) are in these files; one process, one collection.
step tests 150 "$PY" -m pytest -q -p no:cacheprovider -p no:randomly \
  --junitxml="$OUT/tests.xml" "${tests[@]}" "${deselect[@]}"

if has torchvision; then
  step parity 120 "$PY" -m streamseg.bench.versus parity --out "$OUT/parity.json"
  step timing 170 "$PY" -m streamseg.bench.versus timing --out "$OUT/timing.json" --budget 140
else
  reason="torchvision is not installed: $(why_not torchvision)"
  report skip "$OUT" parity "$reason"
  report skip "$OUT" timing "$reason"
fi

# Four 1080p H.264 cameras: model only vs end to end (bench pipeline), bf16.
step clip 60 "$PY" - "$OUT" <<'PYEOF'
import sys
from pathlib import Path

import av

from streamseg.synthetic.scene import SyntheticScene

out = Path(sys.argv[1])
scene = SyntheticScene(seed=1, height=1080, width=1920)
with av.open(str(out / "synthetic_1080p.mp4"), "w") as container:
    stream = container.add_stream("libx264", rate=30)
    stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
    stream.options = {"g": "30", "bf": "2", "preset": "veryfast"}
    for i in range(120):
        image = scene.frame(i).image.numpy()  # (H, W, 3) uint8 RGB
        for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
for decode in ("pyav", "dali"):
    cameras = "".join(
        f"  - id: cam{i}\n    url: {out.resolve() / 'synthetic_1080p.mp4'}\n"
        f"    decode: {decode}\n    loop: true\n"
        for i in range(4)
    )
    (out / f"pipeline_{decode}.yaml").write_text(
        "version: 1\ncameras:\n" + cameras
        + "model:\n  arch: maskrcnn_r50_fpn\n  device: cuda\n  precision: bf16\n"
        "  backend: eager\n  batch_size: 4\n"
    )
print('{"frames": 120, "size": [1080, 1920]}')
PYEOF
step pipeline 90 "$PY" -m streamseg bench pipeline "$OUT/pipeline_pyav.yaml" \
  --clip "$OUT/synthetic_1080p.mp4" --frames 120 --cameras 4

step bench_ops 45 "$PY" -m streamseg bench ops --device cuda --repeat 10

step models 90 bash -c "set -e
  $PY -m streamseg bench model --arch mask2former_r50 --size 800x1333 --batch 1 --device cuda \
    --precision bf16 --backend eager --iters 10 --warmup 2
  $PY -m streamseg bench model --arch maskrcnn_r50_fpn --size 800x1333 --batch 8 --device cuda \
    --precision bf16 --backend eager --iters 10 --warmup 2 --frames host"

# A training step of R50-FPN at 800 px, batch 4: fp32, then bf16 autocast with
# channels_last; one process, each run's peak memory its own.
step train 90 "$PY" - <<'PYEOF'
import json

from streamseg.bench.train import TrainBenchSpec, bench_train

runs = {}
for name, precision, channels_last in (("fp32", "fp32", False), ("bf16_channels_last", "bf16", True)):
    spec = TrainBenchSpec(arch="maskrcnn_r50_fpn", size=(800, 1333), batch=4, precision=precision,
                          channels_last=channels_last, device="cuda", iters=5, warmup=2)
    runs[name] = bench_train(spec)
ratio = runs["bf16_channels_last"]["images_per_s"] / runs["fp32"]["images_per_s"]
print(json.dumps({"runs": runs, "speedup_bf16_channels_last_vs_fp32": round(ratio, 3)}))
PYEOF

# Optional parts: run where installed, else reported as skipped with the reason.
if has nvidia.dali; then
  # The pipeline's own 4 cameras, decoded by NVDEC (decode: dali), served for 30 s.
  step pipeline_dali 75 "$PY" -m streamseg bench pipeline "$OUT/pipeline_dali.yaml" \
    --clip "$OUT/synthetic_1080p.mp4" --frames 120 --cameras 4 --seconds 30
else
  report skip "$OUT" pipeline_dali "DALI is not installed: $(why_not nvidia.dali)"
fi
if has torch_tensorrt; then
  step tensorrt 120 "$PY" -m streamseg bench model --arch maskrcnn_r50_fpn --size 800x1333 \
    --batch 8 --device cuda --iters 10 --warmup 2 --precision bf16 --compare eager,tensorrt
else
  report skip "$OUT" tensorrt "Torch-TensorRT is not installed: $(why_not torch_tensorrt)"
fi

"$PY" scripts/gpu_report.py finish "$OUT"
