#!/usr/bin/env bash
# One command for the day a GPU is lent: every check that needs a real
# NVIDIA GPU, in one run, into one JSON report.
#
#   scripts/gpu-check.sh [OUT_DIR]        (default: gpu-check-<UTC time>)
#
# 1. GPU tests: the Triton kernels compiled for real against the C++ kernels
#    and the reference (tests/ops/test_ops_triton.py, the same cases CI runs in
#    Triton's interpreter), every test marked `gpu` (tests/gpu: DALI NVDEC
#    H.264 vs PyAV, bf16/fp16 vs fp32 on cuda, cuda vs cpu, TF32 error,
#    Mask2Former's panoptic and semantic post-processing on cuda vs cpu), and
#    the tests that add CUDA cases when a GPU is present (preprocess on cuda,
#    TF32 flags).
# 2. `streamseg bench ops --device cuda` (our kernels vs the reference, and
#    vs torchvision's CUDA ops where torchvision imports).
# 3. `streamseg bench model` for Mask R-CNN R50-FPN and Mask2Former R50 at
#    800x1333, batch 1 and 8: eager fp32, then bf16 with eager and each
#    compiled backend that loads (inductor, tensorrt), interleaved; plus
#    R50-FPN bf16 inductor batch 8 with the frames' host-to-device copy timed.
# 4. `streamseg bench pipeline` on four 1080p H.264 cameras (a clip made
#    here from the synthetic scene): model-only vs end to end on the clip,
#    then the pipeline's cameras, `decode: dali` (NVDEC), served for 30 s.
#
# Every step runs even when one before it failed; OUT_DIR/report.json holds
# each step's exit code and JSON output, OUT_DIR/*.log the raw output.
# Exit codes: 0 every step passed, 1 a step failed, 2 no CUDA GPU here.
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
STEPS="$OUT/steps.tsv"
: >"$STEPS"
echo "gpu-check: writing to $OUT"

# step NAME COMMAND...: run, keep stdout as NAME.out and stdout+stderr as NAME.log.
step() {
  local name=$1
  shift
  echo "gpu-check: $name: $*"
  local started=$SECONDS
  "$@" >"$OUT/$name.out" 2> >(tee "$OUT/$name.err" >&2)
  local rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - started))" "$*" >>"$STEPS"
  echo "gpu-check: $name exit $rc"
}

# 1. Tests.
step tests_gpu "$PY" -m pytest -q -p no:cacheprovider \
  --junitxml="$OUT/tests_gpu.xml" \
  tests/ops/test_ops_triton.py tests/ops/test_ops_bench.py \
  tests/segment/test_preprocess.py tests/train/test_train_precision.py
step tests_marked_gpu "$PY" -m pytest -q -p no:cacheprovider -m gpu \
  --junitxml="$OUT/tests_marked_gpu.xml" tests

# 2. Kernels.
step bench_ops "$PY" -m streamseg bench ops --device cuda --repeat 20

# 3. Models at 800x1333.
for arch in maskrcnn_r50_fpn mask2former_r50; do
  for batch in 1 8; do
    common=(--arch "$arch" --size 800x1333 --batch "$batch" --device cuda --iters 30 --warmup 5)
    step "model_${arch}_b${batch}_fp32_eager" "$PY" -m streamseg bench model "${common[@]}" \
      --precision fp32 --backend eager
    backends=eager,inductor
    if "$PY" -c "import torch_tensorrt" 2>/dev/null; then backends=$backends,tensorrt; fi
    step "model_${arch}_b${batch}_bf16_${backends//,/_}" "$PY" -m streamseg bench model \
      "${common[@]}" --precision bf16 --compare "$backends"
  done
done
step model_maskrcnn_r50_fpn_b8_bf16_inductor_host_frames "$PY" -m streamseg bench model \
  --arch maskrcnn_r50_fpn --size 800x1333 --batch 8 --device cuda --iters 30 --warmup 5 \
  --precision bf16 --backend inductor --frames host

# 4. Pipeline: 1080p H.264 cameras decoded by DALI (NVDEC).
"$PY" - "$OUT" <<'PYEOF'
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
    for i in range(300):
        image = scene.frame(i).image.numpy()  # (H, W, 3) uint8 RGB
        for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
cameras = "".join(
    f"  - id: cam{i}\n    url: {out.resolve() / 'synthetic_1080p.mp4'}\n"
    "    decode: dali\n    loop: true\n"
    for i in range(4)
)
(out / "pipeline_dali.yaml").write_text(
    "version: 1\ncameras:\n" + cameras
    + "model:\n  arch: maskrcnn_r50_fpn\n  device: cuda\n  precision: bf16\n"
    "  backend: inductor\n  batch_size: 4\n"
)
PYEOF
# The clip part (model-only vs end to end) reads the clip on 4 cameras; the
# live part serves the pipeline's own 4 cameras, decoded with DALI, for 30 s.
step bench_pipeline_dali "$PY" -m streamseg bench pipeline "$OUT/pipeline_dali.yaml" \
  --clip "$OUT/synthetic_1080p.mp4" --frames 300 --cameras 4 --seconds 30

# The report: every step's exit code, seconds, command and JSON output.
"$PY" - "$OUT" <<'PYEOF'
import json
import platform
import sys
from pathlib import Path

import torch

out = Path(sys.argv[1])
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, rc, seconds, command = line.split("\t", 3)
    text = (out / f"{name}.out").read_text()
    try:
        result = json.loads(text)
    except ValueError:
        result = text[-4000:]  # pytest's summary, or a failed bench's output
    steps.append({"step": name, "exit": int(rc), "seconds": int(seconds),
                  "command": command, "output": result})
report = {
    "gpu": torch.cuda.get_device_name(0),
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "python": platform.python_version(),
    "passed": all(s["exit"] == 0 for s in steps),
    "steps": steps,
}
(out / "report.json").write_text(json.dumps(report, indent=2))
print(f"gpu-check: report in {out / 'report.json'}; passed: {report['passed']}")
sys.exit(0 if report["passed"] else 1)
PYEOF
