#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the tests and print the line that points them at it.
# Installs nothing: needs Debian's postgresql (server binaries in /usr/lib/postgresql/*/bin).
#   eval "$(.ci/pg-start.sh)"      # exports ANYCODE_TEST_PG_URL; prints how to stop on stderr
# Not required: without ANYCODE_TEST_PG_URL the tests start their own server (tests/support/pg_server.py).
# Runs the server as the 'postgres' user when invoked as root (PostgreSQL refuses root), on
# 127.0.0.1 with a free port, trust auth for role 'anycode', fsync off (test data only).
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "pg-start: no PostgreSQL server binaries found (apt-get install postgresql)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/anycode-pg.XXXXXX)
run=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$dir"
  run=(runuser -u postgres --)
fi
"${run[@]}" "$bindir/initdb" -D "$dir/data" -A trust -U anycode -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 \
  || { echo "pg-start: initdb failed, see $dir/initdb.log" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${run[@]}" "$bindir/pg_ctl" -D "$dir/data" -o "-h 127.0.0.1 -p $port -k $dir -F -c max_connections=300" \
  -l "$dir/server.log" -w -t 60 start >&2 \
  || { echo "pg-start: server did not start, see $dir/server.log" >&2; exit 1; }
echo "export ANYCODE_TEST_PG_URL=postgresql+psycopg://anycode@127.0.0.1:$port/postgres"
echo "pg-start: stop with: ${run[*]} $bindir/pg_ctl -D $dir/data -m immediate stop && rm -rf $dir" >&2
