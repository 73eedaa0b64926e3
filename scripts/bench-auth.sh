#!/usr/bin/env bash
# What bearer tokens cost: regina-bench push and consume, the same shape
# against a fresh Regina with tokens off and with JWT_ENABLED (HS256, the
# token sent with every request), interleaved off/on/off/on so machine noise
# hits both alike. Prints one line per run (the JSON report's headline).
# Usage: scripts/bench-auth.sh [seconds-per-run]   (default 10)
# Env: BENCH_AUTH_ROUNDS (default 2), BENCH_AUTH_ONLY=push1
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-10}"
(cd "$root" && cargo build --release --locked -p regina-server -p regina-bench >/dev/null)
bench="$root/target/release/regina-bench"
secret="bench-secret-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
token="$(python3 - "$secret" <<'PY'
import base64, hashlib, hmac, json, sys, time
b = lambda d: base64.urlsafe_b64encode(d).rstrip(b"=").decode()
h = b(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
c = b(json.dumps({"sub": "bench", "role": "read-write", "exp": int(time.time()) + 86400}).encode())
s = b(hmac.new(sys.argv[1].encode(), f"{h}.{c}".encode(), hashlib.sha256).digest())
print(f"{h}.{c}.{s}")
PY
)"

start() {
  data="$(mktemp -d)"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  env "$@" "$root/target/release/regina" --port "$port" --data-dir "$data" > "$data.log" 2>&1 &
  pid=$!
  url="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -sf "$url/health" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "bench-auth: the broker did not start: $(tail -n 3 "$data.log")" >&2
  exit 1
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data" "$data.log"; }
trap 'stop 2>/dev/null || true' EXIT

# run LABEL AUTH(off|on) SCENARIO ARGS...
run() {
  local label="$1" auth="$2"; shift 2
  if [ "$auth" = on ]; then start JWT_ENABLED=true JWT_SECRET="$secret"; else start JWT_ENABLED=false; fi
  local r
  if [ "$auth" = on ]; then
    r="$(REGINA_TOKEN="$token" "$bench" "$@" --url "$url" --pid "$pid" --tag "auth=on" 2>/dev/null)"
  else
    r="$(env -u REGINA_TOKEN "$bench" "$@" --url "$url" --pid "$pid" --tag "auth=off" 2>/dev/null)"
  fi
  stop
  python3 - "$label" "$auth" "$r" <<'PY'
import json, sys
label, auth, r = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
lat = r.get("latencyMs") or r.get("popLatencyMs") or {}
ok = r.get("check", {}).get("ok", "-")
print(f"{label:<28} auth={auth:<3} {r['messagesPerSecond']:>10.0f} msg/s  p50 {lat.get('p50', 0):.2f} ms  "
      f"p99 {lat.get('p99', 0):.2f} ms  check {ok}")
PY
}

# BENCH_AUTH_ONLY=push1: only the batch-1 pushes (where per-request costs show).
rounds="${BENCH_AUTH_ROUNDS:-2}"
for _ in $(seq 1 "$rounds"); do
  for auth in off on; do
    if [ "${BENCH_AUTH_ONLY:-}" != push1 ]; then
      run "push batch 100, 1000 parts" "$auth" push --batch 100 --payload 256 --partitions 1000 --producers 64 --seconds "$secs"
    fi
    run "push batch 1, 1000 parts" "$auth" push --batch 1 --payload 256 --partitions 1000 --producers 64 --seconds "$secs"
    if [ "${BENCH_AUTH_ONLY:-}" != push1 ]; then
      run "consume 1 x 8, batch 100" "$auth" consume --messages 200000 --partitions 1000 --batch 100 --consumers 8 --groups 1 --seconds "$secs"
    fi
  done
done
