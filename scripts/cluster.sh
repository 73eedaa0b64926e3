#!/usr/bin/env bash
# A local three-node Regina cluster on 127.0.0.1, to try clustering.
#
# usage: scripts/cluster.sh start [DIR]     start nodes 1-3 (data in DIR/node1..3,
#                                           logs in DIR/node1..3.log), wait for a leader
#        scripts/cluster.sh status [DIR]    `regina cluster status` through node 1
#        scripts/cluster.sh follower [DIR]  print the URL of a node that does not lead
#        scripts/cluster.sh stop [DIR]      stop the nodes (SIGTERM)
#
#   DIR                default ./regina-cluster
#   REGINA_HTTP_BASE   first HTTP port (default 6632: nodes on 6632, 6633, 6634)
#   REGINA_RAFT_BASE   first Raft port (default 7632)
#   REGINA_BIN         the binary (default target/release/regina, built if missing)
#   REGINA_RAFT_GROUPS, REGINA_TENANCY, REGINA_TENANT_GROUPS
#                      read by every node (e.g. REGINA_RAFT_GROUPS=6 REGINA_TENANCY=on:
#                      six groups, leadership spread two per node a few seconds after start)
#   REGINA_INSECURE_CLUSTER=on
#                      start the nodes without a cluster token (anyone reaching a
#                      Raft port can then read the whole state and vote)
#
# The nodes share a cluster token: DIR/cluster.token, made with fresh random
# bytes on the first start (mode 0600). Requests between nodes carry it; the
# Raft ports refuse everything else.
# Any node answers every route: point a client at any of the three URLs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-start}"
dir="${2:-./regina-cluster}"
http_base="${REGINA_HTTP_BASE:-6632}"
raft_base="${REGINA_RAFT_BASE:-7632}"
bin="${REGINA_BIN:-$root/target/release/regina}"
peers="1=127.0.0.1:$raft_base,2=127.0.0.1:$((raft_base + 1)),3=127.0.0.1:$((raft_base + 2))"

health() { curl -sf --max-time 2 "http://127.0.0.1:$((http_base + $1 - 1))/health" 2>/dev/null || true; }
leader_of() { health "$1" | python3 -c 'import json,sys
try: print(json.load(sys.stdin).get("leader") or "")
except Exception: print("")'; }

case "$cmd" in
  start)
    [ -x "$bin" ] || (cd "$root" && cargo build --release -p regina-server --bin regina)
    mkdir -p "$dir"
    security=(--cluster-token-file "$dir/cluster.token")
    if [ "${REGINA_INSECURE_CLUSTER:-off}" = "on" ]; then
      echo "cluster.sh: WARNING: starting WITHOUT a cluster token (--insecure-cluster):" \
        "anyone who reaches ports $raft_base-$((raft_base + 2)) can read every message and vote" >&2
      security=(--insecure-cluster)
    elif [ ! -s "$dir/cluster.token" ]; then
      (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$dir/cluster.token")
    fi
    for i in 1 2 3; do
      "$bin" --node-id "$i" --port $((http_base + i - 1)) --raft-addr "127.0.0.1:$((raft_base + i - 1))" \
        --peers "$peers" --data-dir "$dir/node$i" "${security[@]}" >> "$dir/node$i.log" 2>&1 &
      echo $! > "$dir/node$i.pid"
    done
    for _ in $(seq 1 200); do
      l1="$(leader_of 1)"; l2="$(leader_of 2)"; l3="$(leader_of 3)"
      if [ -n "$l1" ] && [ "$l1" = "$l2" ] && [ "$l2" = "$l3" ]; then
        echo "cluster up: leader is node $l1"
        for i in 1 2 3; do echo "  node $i: http://127.0.0.1:$((http_base + i - 1))"; done
        exit 0
      fi
      sleep 0.1
    done
    echo "cluster.sh: the nodes did not agree on a leader within 20 s; see $dir/node*.log" >&2
    exit 1
    ;;
  status)
    REGINA_CLUSTER_TOKEN_FILE="$dir/cluster.token" "$bin" cluster status --url "http://127.0.0.1:$http_base"
    ;;
  follower)
    leader="$(leader_of 1)"
    for i in 1 2 3; do
      if [ "$i" != "$leader" ]; then echo "http://127.0.0.1:$((http_base + i - 1))"; exit 0; fi
    done
    exit 1
    ;;
  stop)
    for i in 1 2 3; do
      if [ -f "$dir/node$i.pid" ]; then kill "$(cat "$dir/node$i.pid")" 2>/dev/null || true; rm -f "$dir/node$i.pid"; fi
    done
    ;;
  *)
    sed -n '2,23p' "$0"; exit 2
    ;;
esac
