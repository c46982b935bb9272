#!/usr/bin/env bash
# A throw-away Postgres for the service tests (tests/test_service_postgres.py): installs Debian's postgresql
# if missing, runs its own cluster (as the postgres user, on 127.0.0.1:${PGPORT:-54329}, data in
# /tmp/attn-grader-pg), creates the database `grader` and prints its URL on stdout (logs go to stderr).
set -euo pipefail
PORT="${PGPORT:-54329}"
DATA=/tmp/attn-grader-pg
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
fi
BIN="$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")"
id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres >&2
if ! runuser -u postgres -- "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  rm -rf "$DATA" && mkdir -p "$DATA" && chown postgres:postgres "$DATA"
  runuser -u postgres -- "$BIN/initdb" -D "$DATA" -A trust -U postgres >&2
  runuser -u postgres -- "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DATA -c fsync=off" start >&2
fi
runuser -u postgres -- "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc \
  "SELECT 1 FROM pg_database WHERE datname='grader'" | grep -q 1 \
  || runuser -u postgres -- "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres grader >&2
echo "postgresql://postgres@127.0.0.1:$PORT/grader"
