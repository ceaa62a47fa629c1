#!/usr/bin/env bash
# Installs what streamseg needs on a fresh Debian machine, skipping what is
# already there: Debian packages (redis-server, GStreamer's RTSP server for the
# tests, mosquitto for the MQTT tests, ffmpeg), a virtual environment in .venv, and the package itself.
#
#   scripts/setup.sh          # runtime (with the mask2former extra the panoptic configs need)
#   scripts/setup.sh --dev    # plus test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."

# The extras every install gets: what the shipped configs need (mask2former:
# configs/panoptic_tiny.yaml, examples/panoptic.yaml; tests/test_setup_extras.py
# checks that every config's model family is covered).
extras="[mask2former]"
[ "${1:-}" = "--dev" ] && extras="[dev,mask2former]"

debs=(redis-server ffmpeg g++)  # g++ builds the native ops on first use
if [ "${1:-}" = "--dev" ]; then
  debs+=(openssl mosquitto gstreamer1.0-rtsp gir1.2-gst-rtsp-server-1.0 python3-gi
         gstreamer1.0-plugins-base gstreamer1.0-plugins-good
         gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly
         chromium chromium-driver)  # the console's browser tests
fi
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo_ apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=".venv/.installed$extras"
fresh() { [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ]; }
# A dev install (scripts/test.sh) holds the runtime too.
if ! fresh "$stamp" && ! { [ "$extras" = "[mask2former]" ] && fresh ".venv/.installed[dev,mask2former]"; }; then
  echo "setup: installing Python packages$extras into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first, pinned: it is the CPU wheel this machine carries.
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".$extras"
  touch "$stamp"
fi
# Triton 3.6.0 (what the CUDA build of torch 2.11 ships) beside the venv's own
# Triton: tests/ops/test_ops_triton_launch.py launches every kernel under both.
if [ "${1:-}" = "--dev" ] && [ ! -f .venv/triton-3.6.0/triton/__init__.py ]; then
  echo "setup: installing triton==3.6.0 into .venv/triton-3.6.0 (the launch test's second Triton)"
  .venv/bin/python -m pip install -q --no-deps --target .venv/triton-3.6.0 "triton==3.6.0"
fi
