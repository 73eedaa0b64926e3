#!/usr/bin/env bash
# Every check Regina has, in one command: the workspace's own tests (unit,
# property, storage fault, openraft conformance, crash and HTTP tests against
# real servers on 127.0.0.1), the official Queen MQ Rust client's suites
# against a real Regina and through a follower of a three-node cluster, a
# scenario driven by the official Python client, schemathesis against the
# node's OpenAPI document, the Python client's auth tests, a bounded slice of
# the kill-9 soak, the dashboard in headless Chromium, the Debian package
# (built, installed, started, purged), and network faults
# between three nodes in network namespaces. At the end it prints how many
# tests each stage ran.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every node the tests start ignores how full this machine's disk is (the
# disk watermark has a test of its own, on a tmpfs it fills itself).
export REGINA_DISK_HIGH_PCT=100 REGINA_DISK_LOW_PCT=99

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

# The gate: formatting and lints (warnings denied) before anything runs.
for component in rustfmt clippy; do
  cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# Each stage's output is kept, so the end can say how many tests each ran.
stage_logs="$(mktemp -d)"
stage() { local name="$1"; shift; "$@" 2>&1 | tee "$stage_logs/$name.log"; }
count() { # tests a stage's log reports: nextest, cargo test or a scenario
  local log="$stage_logs/$1.log"
  { grep -oE '[0-9]+ tests? run: [0-9]+ passed' "$log" | awk '{s+=$4} END {if (NR) print s, "passed of", NR, "runs"}'
    grep -oE 'test result: ok\. [0-9]+ passed' "$log" | awk '{s+=$4} END {if (NR) print s, "passed in", NR, "suites"}'
    grep -oE '[0-9]+ passed, [0-9]+ failed|[0-9]+/[0-9]+ [a-z ]*checks passed' "$log" | awk '{s+=$1} END {if (NR) print s, "checks passed"}'
  } | head -1
}

cargo build --workspace --all-targets --locked
stage workspace cargo nextest run --workspace --locked --no-fail-fast

# The official Rust client's live suites against a fresh Regina, then its
# wire suites (which need no broker and pin the client's own view).
stage official scripts/queen-suite.sh core semantics coverage admin reads kv_timers locks streams docs \
  http_wire wire_forms autopilot_wire autopilot_env reads_wire kv_timers_wire locks_wire ephemeral_wire supervision_wire

# The official core, KV/timers and streams suites again, through a follower
# of a local three-node cluster: every request is forwarded to the leader.
cargo build --release --locked -p regina-server --bin regina
cluster_dir="$(mktemp -d)"
export REGINA_HTTP_BASE="${REGINA_HTTP_BASE:-26632}" REGINA_RAFT_BASE="${REGINA_RAFT_BASE:-27632}"
trap 'scripts/cluster.sh stop "$cluster_dir"; rm -rf "$cluster_dir"' EXIT
scripts/cluster.sh start "$cluster_dir"
follower="$(scripts/cluster.sh follower "$cluster_dir")"
# The stage is only worth its name if every request went through a node that
# did not lead: checked before and after the suites.
is_follower() { curl -sf "$follower/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); sys.exit(0 if h.get("leader") not in (None, h.get("nodeId")) else 1)'; }
is_follower || { echo "test.sh: $follower leads; the cluster stage must run through a follower" >&2; exit 1; }
QUEEN_TEST_URL="$follower" stage follower scripts/queen-suite.sh core kv_timers streams
is_follower || { echo "test.sh: $follower became the leader during the cluster stage" >&2; exit 1; }
scripts/cluster.sh stop "$cluster_dir"

stage python scripts/python-scenario.sh

# schemathesis against a live node, from the node's own OpenAPI document: no
# 5xx, no answer outside its schema or content type, no hang.
stage schemathesis scripts/schemathesis.sh

# The official Python client's auth tests, against a node without auth and
# against one with JWT enabled: each of them runs, and passes, in one of the two.
stage auth scripts/python-auth.sh

# A bounded slice of the kill-9 soak: SIGKILL/restart cycles of one node under
# mixed load (pushes, pops with acks, steps, KV, timers), each cycle audited.
# The long campaign is scripts/soak.sh (docs/soak.md).
stage soak python3 scripts/soak.py --cycles 20 --binary "${CARGO_TARGET_DIR:-target}/release/regina"

# The dashboard in headless Chromium against the release binary: every page
# loads without console errors and shows what the API says; replaying,
# deleting and purging dead letters, retrying a failed timer and job and
# seeking a group work end to end; with JWT on, the login works.
stage dashboard scripts/dashboard-test.sh --binary "${CARGO_TARGET_DIR:-target}/release/regina"

# The Debian package (cargo deb): its contents, control fields and systemd
# unit; installed with dpkg, the packaged binary starts from the packaged
# settings and answers /health; then purged.
stage deb scripts/deb-test.sh

# Network faults between three nodes in network namespaces (needs root):
# packet loss and one-way drops (nftables), queueing delay (tbf), partitions
# (link down), each under load and audited after the heal and through each
# node; then every sabotage of the record must make the audit fail. About
# 75 s; the long campaign is scripts/netfaults.sh --rounds N (docs/netfaults.md).
stage netfaults python3 scripts/netfaults.py --rounds 1 --self-check --binary "${CARGO_TARGET_DIR:-target}/release/regina"

echo "tests per stage:"
for s in workspace official follower python schemathesis auth soak dashboard deb netfaults; do echo "  $s: $(count "$s")"; done
