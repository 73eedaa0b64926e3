#!/usr/bin/env bash
# Every check Regina has, in one command: the workspace's own tests (unit,
# property, storage fault, crash and HTTP tests against real servers on
# 127.0.0.1), then the official Queen MQ Rust client's live suite against a
# real Regina.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo build --workspace --all-targets --locked
cargo nextest run --workspace --locked --no-fail-fast

scripts/queen-suite.sh core
scripts/python-scenario.sh
