#!/usr/bin/env bash
# The demo on a fresh machine: install what is missing, make sure a Redis
# answers on 127.0.0.1:6379, then serve the default pipeline.yaml (two
# synthetic cameras, the small Mask R-CNN, detections on Redis Streams).
#
#   scripts/demo.sh                  # serves pipeline.yaml until Ctrl-C
#   scripts/demo.sh my-pipeline.yaml
#
# In another terminal: .venv/bin/streamseg subscribe --count 5
#
# Stopping: Ctrl-C, or SIGTERM/SIGINT to this script (as `kill`, a service
# manager or a container stop sends it), reaches `serve`, which drains what
# it read, flushes Redis and exits; then this script stops the redis-server
# it started (if it started one) and exits with serve's exit code.
#
# Environment: STREAMSEG_REDIS_PORT (default 6379); STREAMSEG_SKIP_SETUP=1
# uses .venv as it is (no scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

pipeline=${1:-pipeline.yaml}
redis_port=${STREAMSEG_REDIS_PORT:-6379}

[ "${STREAMSEG_SKIP_SETUP:-}" = "1" ] || scripts/setup.sh

started_redis=""
stop_redis() {
  if [ -n "$started_redis" ] && [ -f "$started_redis" ]; then
    echo "demo: stopping the redis-server it started"
    kill "$(cat "$started_redis")" 2>/dev/null || true
  fi
}
trap stop_redis EXIT

if ! redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
  echo "demo: starting redis-server on 127.0.0.1:$redis_port"
  started_redis="/tmp/streamseg-demo-redis-$redis_port.pid"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize yes --pidfile "$started_redis" >/dev/null
  for _ in $(seq 50); do
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

export STREAMSEG_REDIS_URL=${STREAMSEG_REDIS_URL:-redis://127.0.0.1:$redis_port/0}
# serve runs in a process group of its own (job control), so that a terminal's
# Ctrl-C reaches it once, forwarded from here, not twice (a second signal
# means "exit now, without draining"). Bash runs a trap only between
# commands, and `wait` returns when one comes: wait again until serve is gone.
set -m
.venv/bin/streamseg serve "$pipeline" &
serve_pid=$!
set +m
trap 'kill -TERM "$serve_pid" 2>/dev/null || true' TERM
trap 'kill -INT "$serve_pid" 2>/dev/null || true' INT
status=0
while :; do
  wait "$serve_pid" && status=0 || status=$?
  kill -0 "$serve_pid" 2>/dev/null || break
done
exit "$status"
