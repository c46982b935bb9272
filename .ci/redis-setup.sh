#!/usr/bin/env bash
# A throw-away Redis for the queue tests (tests/test_service_queue*.py): installs Debian's redis-server if
# missing, runs its own instance on 127.0.0.1:${REDIS_PORT:-63799} (no persistence, 64 databases, data and log
# in /tmp/attn-grader-redis) and prints its URL on stdout (logs go to stderr). Tests take one database each.
set -euo pipefail
PORT="${REDIS_PORT:-63799}"
DIR=/tmp/attn-grader-redis
if ! command -v redis-server >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2
fi
mkdir -p "$DIR"
if ! redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1; then
  redis-server --bind 127.0.0.1 --port "$PORT" --daemonize yes --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" \
    --dir "$DIR" --save "" --appendonly no --databases 64 --protected-mode yes >&2
  for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null
fi
echo "redis://127.0.0.1:$PORT/0"
