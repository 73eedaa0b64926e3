#!/usr/bin/env bash
# Every check Regina has, in one command: the workspace's own tests (unit,
# property, storage fault, openraft conformance, crash and HTTP tests against
# real servers on 127.0.0.1), the official Queen MQ Rust client's suites
# against a real Regina, and a scenario driven by the official Python client.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo build --workspace --all-targets --locked
cargo nextest run --workspace --locked --no-fail-fast

# The official Rust client's live suites against a fresh Regina, then its
# wire suites (which need no broker and pin the client's own view).
scripts/queen-suite.sh core semantics coverage admin reads kv_timers locks \
  http_wire wire_forms autopilot_wire reads_wire kv_timers_wire locks_wire ephemeral_wire supervision_wire
scripts/python-scenario.sh
