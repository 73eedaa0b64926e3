#!/usr/bin/env bash
# Every check Regina has, in one command: the workspace's own tests (unit,
# property, storage fault, openraft conformance, crash and HTTP tests against
# real servers on 127.0.0.1), the official Queen MQ Rust client's suites
# against a real Regina and through a follower of a three-node cluster, a
# scenario driven by the official Python client, and that client's auth tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

# The gate: formatting and lints (warnings denied) before anything runs.
for component in rustfmt clippy; do
  cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

cargo build --workspace --all-targets --locked
cargo nextest run --workspace --locked --no-fail-fast

# The official Rust client's live suites against a fresh Regina, then its
# wire suites (which need no broker and pin the client's own view).
scripts/queen-suite.sh core semantics coverage admin reads kv_timers locks \
  http_wire wire_forms autopilot_wire reads_wire kv_timers_wire locks_wire ephemeral_wire supervision_wire

# The official core and KV/timers suites again, through a follower of a local
# three-node cluster: every request is forwarded to the leader.
cargo build --release --locked -p regina-server --bin regina
cluster_dir="$(mktemp -d)"
export REGINA_HTTP_BASE="${REGINA_HTTP_BASE:-26632}" REGINA_RAFT_BASE="${REGINA_RAFT_BASE:-27632}"
trap 'scripts/cluster.sh stop "$cluster_dir"; rm -rf "$cluster_dir"' EXIT
scripts/cluster.sh start "$cluster_dir"
QUEEN_TEST_URL="$(scripts/cluster.sh follower "$cluster_dir")" scripts/queen-suite.sh core kv_timers
scripts/cluster.sh stop "$cluster_dir"

scripts/python-scenario.sh

# The official Python client's auth tests, against a node without auth and
# against one with JWT enabled: each of them runs, and passes, in one of the two.
scripts/python-auth.sh
