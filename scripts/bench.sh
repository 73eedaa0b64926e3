#!/usr/bin/env bash
# Runs regina-bench's named scenarios against a freshly started Regina
# (release build, fsync on, data in a temporary directory), collects every
# JSON report into target/bench/results.json and draws the charts into
# docs/charts. Then repeats a few runs with fsync off, to show what
# durability costs; every report carries "fsync": "on" or "off", and the
# charts leave the fsync-off runs out.
# Usage: scripts/bench.sh [seconds-per-run]   (default 10)
# Env: BENCH_SCALE_STEPS   partition counts of the scale run
#                          (default 1000,10000,100000,1000000,10000000)
#
# The broker and the load generator share this machine's cores; run it alone
# (other processes writing to the same disk slow fdatasync down a lot).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-10}"
out="$root/target/bench"
mkdir -p "$out" "$root/docs/charts"
(cd "$root" && cargo build --release -p regina-server -p regina-bench >/dev/null)
bench="$root/target/release/regina-bench"

# start_broker [regina args...]: a fresh broker on a free port and a fresh
# data directory; extra arguments go to regina (e.g. --fsync off).
start_broker() {
  data="$(mktemp -d)"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$root/target/release/regina" --port "$port" --data-dir "$data" "$@" > "$data.log" 2>&1 &
  pid=$!
  url="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -sf "$url/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # Say why, or a broker that rejects an argument only shows as a missing run.
  echo "bench: the broker did not start ($*): $(tail -n 3 "$data.log" 2>/dev/null)" >&2
}
stop_broker() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data" "$data.log"; }
trap 'stop_broker 2>/dev/null || true' EXIT

# What `run` starts the broker with, and the "fsync" field its reports get.
broker_args=()
fsync=on

runs=()
run() {
  local label="$1"; shift
  echo "bench: $label (fsync $fsync)" >&2
  # ${a[@]+...}: an empty array under `set -u` on older bash.
  start_broker ${broker_args[@]+"${broker_args[@]}"}
  local r
  r="$("$bench" "$@" --url "$url" --pid "$pid" --tag "fsync=$fsync" 2>/dev/null || true)"
  stop_broker
  [ -n "$r" ] && runs+=("$r")
}

for parts in 1 1000 100000; do
  for batch in 1 10 100; do
    run "push batch $batch, $parts partitions" push --batch "$batch" --payload 256 --partitions "$parts" --producers 64 --seconds "$secs"
  done
done
run "consume, 1 group" consume --messages 1000000 --partitions 1000 --batch 100 --consumers 8 --groups 1 --seconds 60
run "consume, 3 groups" consume --messages 300000 --partitions 1000 --batch 100 --consumers 3 --groups 3 --seconds 60
for rate in 5000 20000 50000; do
  run "e2e at $rate msg/s" e2e --rate "$rate" --partitions 1000 --seconds "$secs" --groups 1 --consumers 16
done
run "txn" txn --producers 32 --messages 200000 --seconds "$secs"
run "kv" kv --producers 8 --ratio 0.8 --keys 1000 --seconds "$secs"
# Job queues: claim + complete per job, each its own call, at a shallow and a
# deep queue (memory per pending job comes from the deep one).
run "jobs, 1,000 pending" jobs --pending 1000 --workers 16 --producers 8 --batch 256 --seconds "$secs"
run "jobs, 1,000,000 pending" jobs --pending 1000000 --workers 16 --producers 8 --batch 256 --seconds "$secs"
run "timers" timers --messages 10000 --seconds 20
run "partitions" partitions --partitions 1000000
# One queue grown through every count: pop latency and memory per partition
# must stay flat. Then the same broker is killed with SIGKILL and timed until
# it serves again with every one of those partitions on disk.
echo "bench: scale, then restart (fsync on)" >&2
start_broker
r="$("$bench" scale --steps "${BENCH_SCALE_STEPS:-1000,10000,100000,1000000,10000000}" --pops 2000 \
  --url "$url" --pid "$pid" --tag fsync=on 2>/dev/null || true)"
if [ -n "$r" ]; then
  runs+=("$r")
  scale_queue="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["queue"])' "$r")"
  scale_parts="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["steps"][-1]["partitions"])' "$r")"
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  "$root/target/release/regina" --port "$port" --data-dir "$data" > "$data.log" 2>&1 &
  pid=$!
  r="$("$bench" wait-ready --url "$url" --queue "$scale_queue" --seconds 120 --tag fsync=on \
    --tag "partitionsOnDisk=$scale_parts" 2>/dev/null || true)"
  [ -n "$r" ] && runs+=("$r")
fi
stop_broker

# restart: 1,000,000 messages on disk, SIGKILL, then time until a pop is answered.
echo "bench: restart" >&2
start_broker
"$bench" fill --url "$url" --messages 1000000 --partitions 1000 --batch 100 --producers 16 >/dev/null 2>&1 || true
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
"$root/target/release/regina" --port "$port" --data-dir "$data" > "$data.log" 2>&1 &
pid=$!
r="$("$bench" wait-ready --url "$url" --queue bench --seconds 60 --tag fsync=on --tag messagesOnDisk=1000000 2>/dev/null || true)"
stop_broker
[ -n "$r" ] && runs+=("$r")

# The same loads without fsync: the difference is what durability costs.
broker_args=(--fsync off)
fsync=off
run "push batch 100, 1000 partitions" push --batch 100 --payload 256 --partitions 1000 --producers 64 --seconds "$secs"
run "push batch 10, 1000 partitions" push --batch 10 --payload 256 --partitions 1000 --producers 64 --seconds "$secs"
run "consume, 1 group" consume --messages 1000000 --partitions 1000 --batch 100 --consumers 8 --groups 1 --seconds 60
run "txn" txn --producers 32 --messages 200000 --seconds "$secs"
broker_args=()
fsync=on

printf '{"runs": [%s]}\n' "$(IFS=,; echo "${runs[*]}")" > "$out/results.json"
# One chart line per push batch size (the charts skip fsync-off runs; their
# label says so for anyone reading results.json).
python3 - "$out/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    if r.get("scenario") == "push":
        r["label"] = f"batch {r.get('batch')}" + (", fsync off" if r.get("fsync") == "off" else "")
json.dump(d, open(sys.argv[1], "w"), indent=1)
PY
echo "bench: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$out/results.json") runs in $out/results.json" >&2
python3 "$root/scripts/bench-tables.py" "$out/results.json" > "$out/tables.md" &&
  echo "bench: tables for docs/benchmarks.md in $out/tables.md" >&2
if "$bench" chart --input "$out/results.json" --out "$root/docs/charts" 2>/dev/null; then
  echo "bench: charts in docs/charts" >&2
fi
