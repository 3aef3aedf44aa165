#!/usr/bin/env bash
# Stops everything the local stack started (every pidfile under .local/run:
# moto, the cluster nodes, PostgreSQL, workers and emulators started by make local, and
# the private clusters of tests under .local/*/run, not the stacks of make
# e2e and make bench) and
# removes the clusters' node state and PostgreSQL's files, so the next
# up.sh starts clean.
# Certificates are kept. Safe to run when nothing is running.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stopped() { ! kill -0 "$1" 2>/dev/null; }

shopt -s nullglob
read -ra ports <<<"$CACHE_PORTS"
[ -f "$RUN_DIR/moto.pid" ] && ports+=("$MOTO_PORT") # a LocalStack we reused is not ours to stop
[ -f "$RUN_DIR/moto-dynamodb.pid" ] && ports+=("$MOTO_DYNAMODB_PORT")
[ -f "$RUN_DIR/postgres.pid" ] && ports+=("$PGPORT")
pids=()
# Private clusters of tests keep their state one level down. The stacks of
# make e2e and make bench run beside this one, and their targets stop them.
for pidfile in "$RUN_DIR"/*.pid "$LOCAL_STATE"/*/run/*.pid; do
  case "$pidfile" in "$LOCAL_STATE"/e2e/run/* | "$LOCAL_STATE"/bench/run/*) continue ;; esac
  pid=$(cat "$pidfile")
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null; then
    pids+=("$pid")
  fi
  rm -f "$pidfile"
done
for pid in "${pids[@]}"; do
  wait_until 10 stopped "$pid" || { kill -KILL "$pid" 2>/dev/null || true; }
done
# The driver's emulators die with it, even killed outright, and their
# functions with them: nothing of another stack (make e2e beside make local)
# is touched.

for dir in "$LOCAL_STATE"/*/cache; do
  case "$dir" in "$LOCAL_STATE"/e2e/* | "$LOCAL_STATE"/bench/*) ;; *) rm -rf "$dir" ;; esac
done
rm -rf "$CACHE_DIR"
# PostgreSQL's files: the next up.sh makes its database and slot anew.
if [ -d "$PG_DIR" ] && ! { [ -f "$PG_DIR/data/postmaster.pid" ] && kill -0 "$(head -1 "$PG_DIR/data/postmaster.pid")" 2>/dev/null; }; then
  rm -rf "$PG_DIR"
fi
for port in "${ports[@]}"; do
  wait_until 5 port_closed "$port" ||
    die "port $port is still in use by a process this stack did not start"
done
say "local stack down (${#pids[@]} processes stopped)"
