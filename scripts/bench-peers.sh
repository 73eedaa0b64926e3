#!/usr/bin/env bash
# Regina beside its strongest durable peer on this machine: Redis streams
# with AOF and `appendfsync always` (fsync before every reply, group
# committed), measured in one interleaved run. Each round runs every shape
# on a fresh Regina (release build, fsync on) and on a fresh Redis, in
# alternating order; the table of medians and ratios goes into
# docs/benchmarks.md (between the `peers` markers) and to stdout.
#
# usage: scripts/bench-peers.sh [--rounds N] [--seconds S] [--connections C[,C...]]
#                               [--shapes push1,push10,push100,consume1,consume3] [--no-write]
#                               [--no-instructions] [--sustained SECONDS]
#   defaults: 3 rounds, 10 s per run, 16 connections, every shape; with
#   --sustained, one push (batch 100, 16 connections) of that many seconds
#   into one server of each kind, its first and last minute (with
#   --rounds 0, that run alone); then
#   broker instructions per pushed and per consumed message
#   (scripts/bench-instructions.py: perf where it counts them, else callgrind)
#
# Installs Debian's redis-server if it is missing. Run it alone on the
# machine: both servers share its cores and disk with the load generator.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v redis-server >/dev/null; then
  echo "bench-peers: installing redis-server (Debian package)" >&2
  (apt-get update -qq && apt-get install -y -qq redis-server) >/dev/null
fi
if [[ " $* " != *" --no-instructions "* ]] && ! command -v valgrind >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq valgrind) >/dev/null
fi
(cd "$root" && cargo build --release --locked -p regina-server -p regina-bench --bin regina --bin regina-bench >/dev/null)
exec python3 "$root/scripts/bench-peers.py" --root "$root" "$@"
