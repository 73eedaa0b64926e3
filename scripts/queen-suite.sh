#!/usr/bin/env bash
# Runs the official Queen MQ Rust client's live integration suites against
# Regina. The client crate (queen-mq, pinned below) is fetched through cargo
# into target/ at run time; none of its code is kept in this repository.
#
# usage: scripts/queen-suite.sh [suite ...]      (default: core)
#   QUEEN_TEST_URL set   -> run against that broker
#   QUEEN_TEST_URL unset -> start target/release/regina (built if needed) on
#                           a free port with a temporary data directory
#   QUEEN_SUITE_SKIP     -> space-separated exact test names to skip (each
#                           listed in the output, never counted as passed)
set -euo pipefail

QUEEN_MQ_VERSION="2.7.0"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/target/queen-suite"
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(core)

mkdir -p "$work/fetch/src"
cat > "$work/fetch/Cargo.toml" <<TOML
[package]
name = "queen-suite-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
queen-mq = "=$QUEEN_MQ_VERSION"

[workspace]
TOML
echo 'fn main() {}' > "$work/fetch/src/main.rs"
cargo fetch --manifest-path "$work/fetch/Cargo.toml" >/dev/null
src="$(cargo metadata --format-version 1 --manifest-path "$work/fetch/Cargo.toml" \
  | python3 -c 'import json,sys; m=json.load(sys.stdin); print([p["manifest_path"] for p in m["packages"] if p["name"]=="queen-mq"][0])')"
src="$(dirname "$src")"
crate="$work/queen-mq-$QUEEN_MQ_VERSION"
if [ ! -f "$crate/.copied" ]; then
  rm -rf "$crate"
  cp -r "$src" "$crate"
  chmod -R u+w "$crate"
  # Run as a standalone package, not as a member of our workspace.
  printf '\n[workspace]\n' >> "$crate/Cargo.toml"
  touch "$crate/.copied"
fi

broker_pid=""
cleanup() {
  if [ -n "$broker_pid" ]; then kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
  # An `if`, not `[ ] && rm`: a false test as the trap's last command
  # would turn a passing run's exit status into 1.
  if [ -n "${data_dir:-}" ]; then rm -rf "$data_dir"; fi
}
trap cleanup EXIT

if [ -z "${QUEEN_TEST_URL:-}" ]; then
  (cd "$root" && cargo build --release -p regina-server --bin regina >/dev/null)
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  data_dir="$(mktemp -d)"
  "$root/target/release/regina" --port "$port" --data-dir "$data_dir" > "$work/broker.log" 2>&1 &
  broker_pid=$!
  export QUEEN_TEST_URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -sf "$QUEEN_TEST_URL/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
fi
export QUEEN_TEST_STRICT=1

skip_args=()
for t in ${QUEEN_SUITE_SKIP:-}; do
  echo "queen-suite: skipping $t (not counted as passed)"
  skip_args+=(--skip "$t")
done

status=0
for suite in "${suites[@]}"; do
  echo "queen-suite: running $suite against $QUEEN_TEST_URL"
  # No debug info and no incremental cache: each suite is a test binary of
  # its own, and with them the suites would weigh gigabytes.
  (cd "$crate" && CARGO_TARGET_DIR="$work/target" CARGO_PROFILE_DEV_DEBUG=0 CARGO_INCREMENTAL=0 cargo test --locked --test "$suite" -- --exact "${skip_args[@]}") || status=1
done
exit $status
