# streamseg GPU image: CUDA + cuDNN, PyTorch (CUDA build), NVIDIA DALI (NVDEC
# decoding), Torch-TensorRT, and the streamseg package with its native kernels.
#
#   docker build -t streamseg:gpu .
#   docker run --gpus all -v $PWD/pipeline.yaml:/config/pipeline.yaml \
#       -p 8080:8080 streamseg:gpu serve /config/pipeline.yaml
#
# The package is built as a wheel with setup.py, so the image carries the C++
# kernel sources (streamseg/ops/csrc) and the Triton kernels
# (streamseg/ops/triton). The C++ CPU kernels are compiled on first use and
# cached in $TORCH_EXTENSIONS_DIR (default ~/.cache/streamseg/torch_extensions;
# mount a volume there to keep it across restarts); the Triton GPU kernels are
# compiled by Triton on first use (its cache: ~/.triton). Both need a C/C++
# compiler at run time, which the devel base has; no nvcc is used.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04
FROM ${CUDA_IMAGE}

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu128
ARG TORCH_TENSORRT_VERSION=2.13.0
ARG DALI_PACKAGE=nvidia-dali-cuda120

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,video

# Python 3.11, FFmpeg libraries for PyAV, curl for health checks.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3.11 python3.11-venv python3.11-dev ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv $VIRTUAL_ENV \
 && pip install --upgrade pip

# The heavy, rarely changing layers first: torch (CUDA build), Torch-TensorRT, DALI.
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}" \
 && pip install "torch-tensorrt==${TORCH_TENSORRT_VERSION}" --extra-index-url "${TORCH_INDEX}" \
 && pip install "${DALI_PACKAGE}" --extra-index-url https://pypi.nvidia.com

WORKDIR /app
# The wheel is built from exactly these files with the `pip wheel` line below;
# tests/ops/test_ops_packaging.py reads both from this file and checks the
# wheel it builds the same way carries the kernels.
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY streamseg ./streamseg
COPY ops ./ops
RUN pip wheel --no-deps --wheel-dir /tmp/dist . \
 && pip install "$(ls /tmp/dist/streamseg-*.whl)[dali,tensorrt,mask2former]" \
      --extra-index-url https://pypi.nvidia.com --extra-index-url "${TORCH_INDEX}" \
 && rm -rf /tmp/dist \
 && python -c "import streamseg.cli; print('streamseg import ok')"

COPY pipeline.yaml ./pipeline.yaml
COPY models ./models

RUN useradd --create-home --uid 10001 streamseg
USER streamseg

EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=120s \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
# Exec form (never `ENTRYPOINT streamseg ...`): serve itself is process 1, so
# docker stop's and the kubelet's SIGTERM reaches it (process 1 ignores a
# signal it has no handler for; sh -c would be process 1 and drop it), and it
# drains and exits 0 within runtime.drain_timeout, inside compose's
# stop_grace_period and the StatefulSet's terminationGracePeriodSeconds
# (tests/service/test_serve_signals.py runs this command as process 1).
ENTRYPOINT ["streamseg"]
CMD ["serve", "/app/pipeline.yaml"]
