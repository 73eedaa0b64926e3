#!/usr/bin/env bash
# Network faults between three real nodes in network namespaces
# (scripts/netfaults.py, docs/netfaults.md) against the release binary, built
# first when missing. Needs root (CAP_NET_ADMIN); installs iproute2 and
# nftables with apt-get when missing. Arguments go to netfaults.py:
#   scripts/netfaults.sh --rounds 10 --seed 7
set -euo pipefail
cd "$(dirname "$0")/.."
export REGINA_DISK_HIGH_PCT="${REGINA_DISK_HIGH_PCT:-100}" REGINA_DISK_LOW_PCT="${REGINA_DISK_LOW_PCT:-99}"
bin="${REGINA_BIN:-${CARGO_TARGET_DIR:-target}/release/regina}"
[ -x "$bin" ] || cargo build --release --locked -p regina-server --bin regina
exec python3 scripts/netfaults.py --binary "$bin" "$@"
