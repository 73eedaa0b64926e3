#!/usr/bin/env bash
# Runs tests/python/scenario.py and tests/python/stream_scenario.py (the
# stream SDK: a windowed aggregation into a sink queue) with the official
# Python client (queen-mq, pinned below, installed with pip) against a
# freshly started Regina. The node is started from Queen's settings only
# (PORT, QUEEN_RAFT_DIR, QUEEN_RAFT_NODE_ID, LOG_LEVEL, QUEEN_LOG_JSON: see
# docs/queen-settings.md), as a Queen deployment's environment would start it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python3 -m pip install --quiet --disable-pip-version-check "queen-mq[zstd]==2.6.0"
(cd "$root" && cargo build --release -p regina-server --bin regina >/dev/null)
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
data_dir="$(mktemp -d)"
PORT="$port" QUEEN_RAFT_DIR="$data_dir" QUEEN_RAFT_NODE_ID=1 LOG_LEVEL=info QUEEN_LOG_JSON=true \
  "$root/target/release/regina" > "$data_dir.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data_dir" "$data_dir.log"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
# The node read them: it serves on PORT, keeps its data in QUEEN_RAFT_DIR and logs JSON.
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "python-scenario: no node on PORT $port" >&2; cat "$data_dir.log" >&2; exit 1; }
[ -d "$data_dir/raft" ] || { echo "python-scenario: QUEEN_RAFT_DIR was not used" >&2; exit 1; }
head -1 "$data_dir.log" | python3 -c 'import json,sys; json.loads(sys.stdin.readline())' \
  || { echo "python-scenario: QUEEN_LOG_JSON=true did not give JSON logs" >&2; head -3 "$data_dir.log" >&2; exit 1; }
timeout 300 python3 "$root/tests/python/scenario.py" "http://127.0.0.1:$port"
timeout 300 python3 "$root/tests/python/stream_scenario.py" "http://127.0.0.1:$port"
