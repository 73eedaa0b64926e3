#!/usr/bin/env bash
# Runs the official Python client's auth tests (tests/test_auth.py of the
# queen-mq 2.6.0 sdist, fetched with pip into target/, never kept in this
# repository) twice: against a Regina without auth, and against one with
# JWT_ENABLED and the JWT_SECRET the tests sign their HS256 tokens with.
# Each test gates itself on JWT_SECRET, so it runs in exactly one of the
# two; this script fails unless every test of the file ran and passed in
# one of them (a test skipped in both, or failed in either, fails it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/target/python-auth"
mkdir -p "$work"
python3 -m pip install --quiet --disable-pip-version-check \
  "queen-mq[zstd]==2.6.0" "pytest==8.4.2" "pytest-asyncio==1.2.0" "httpx"
if [ ! -f "$work/test_auth.py" ]; then
  rm -rf "$work/sdist" && mkdir -p "$work/sdist"
  python3 -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    -d "$work/sdist" "queen-mq==2.6.0"
  tar -xzf "$work/sdist"/queen_mq-2.6.0.tar.gz -C "$work/sdist"
  cp "$work/sdist/queen_mq-2.6.0/tests/test_auth.py" "$work/test_auth.py"
fi
# REGINA_BIN: the binary to test (default target/release/regina, built).
bin="${REGINA_BIN:-}"
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release -p regina-server --bin regina >/dev/null)
  bin="$root/target/release/regina"
fi

secret="regina-python-auth-$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')"
pids=()
dirs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for d in "${dirs[@]}"; do rm -rf "$d" "$d.log"; done
}
trap cleanup EXIT

# start NAME ENV... : a fresh Regina on a free port; prints its URL.
start() {
  local port data
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  data="$(mktemp -d)"
  dirs+=("$data")
  env "$@" "$bin" --port "$port" --data-dir "$data" > "$data.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
  url="http://127.0.0.1:$port"
}

start JWT_ENABLED=false
plain="$url"
start JWT_ENABLED=true JWT_SECRET="$secret"
jwt="$url"

cd "$work"
run() {
  local name="$1"; shift
  env "$@" timeout 300 python3 -m pytest -q -p no:cacheprovider -o asyncio_mode=strict \
    --junitxml="$work/$name.xml" test_auth.py
}
echo "== test_auth.py against Regina without auth ($plain)"
run plain -u JWT_SECRET QUEEN_URL="$plain"
echo "== test_auth.py against Regina with JWT_ENABLED and JWT_SECRET ($jwt)"
run jwt JWT_SECRET="$secret" QUEEN_URL="$jwt"

python3 - "$work/plain.xml" "$work/jwt.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

ran, everything = {}, set()
for path in sys.argv[1:]:
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name")
        everything.add(name)
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                sys.exit(f"{name} failed in {path}")
            if child.tag == "skipped":
                outcome = "skipped"
        if outcome == "passed":
            ran.setdefault(name, []).append(path)
missing = sorted(everything - set(ran))
if not everything or missing:
    sys.exit(f"test_auth.py: never ran: {missing or 'no tests at all'}")
twice = sorted(n for n, where in ran.items() if len(where) > 1)
if twice:
    sys.exit(f"test_auth.py: ran in both configurations (its gate is broken): {twice}")
print(f"test_auth.py: {len(ran)} passed, 0 failed (each in exactly one of the two configurations)")
PY
