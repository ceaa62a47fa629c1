#!/usr/bin/env bash
# The demo on a fresh machine: install what is missing, make sure a Redis
# answers on 127.0.0.1:6379, then serve the default pipeline.yaml (two
# synthetic cameras, the small Mask R-CNN, detections on Redis Streams).
#
#   scripts/demo.sh                  # serves pipeline.yaml until Ctrl-C
#   scripts/demo.sh my-pipeline.yaml
#
# In another terminal: .venv/bin/streamseg subscribe --count 5
set -euo pipefail
cd "$(dirname "$0")/.."

pipeline=${1:-pipeline.yaml}
redis_port=${STREAMSEG_REDIS_PORT:-6379}

scripts/setup.sh

started_redis=""
if ! redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
  echo "demo: starting redis-server on 127.0.0.1:$redis_port"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --pidfile "/tmp/streamseg-demo-redis-$redis_port.pid" >/dev/null
  started_redis="/tmp/streamseg-demo-redis-$redis_port.pid"
  for _ in $(seq 50); do
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

stop_redis() {
  if [ -n "$started_redis" ] && [ -f "$started_redis" ]; then
    echo "demo: stopping the redis-server it started"
    kill "$(cat "$started_redis")" 2>/dev/null || true
  fi
}
trap stop_redis EXIT

export STREAMSEG_REDIS_URL=${STREAMSEG_REDIS_URL:-redis://127.0.0.1:$redis_port/0}
.venv/bin/streamseg serve "$pipeline"
