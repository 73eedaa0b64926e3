#!/usr/bin/env bash
# Runs tests/python/scenario.py and tests/python/stream_scenario.py (the
# stream SDK: a windowed aggregation into a sink queue) with the official
# Python client (queen-mq, pinned below, installed with pip) against a
# freshly started Regina.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python3 -m pip install --quiet --disable-pip-version-check "queen-mq[zstd]==2.6.0"
(cd "$root" && cargo build --release -p regina-server --bin regina >/dev/null)
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
data_dir="$(mktemp -d)"
"$root/target/release/regina" --port "$port" --data-dir "$data_dir" > "$data_dir.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data_dir" "$data_dir.log"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
timeout 300 python3 "$root/tests/python/scenario.py" "http://127.0.0.1:$port"
timeout 300 python3 "$root/tests/python/stream_scenario.py" "http://127.0.0.1:$port"
