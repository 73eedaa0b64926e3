#!/usr/bin/env bash
# The kill-9 soak (scripts/soak.py) against the release binary, built first
# when missing. Arguments go to soak.py: scripts/soak.sh --cycles 200 --seed 7
set -euo pipefail
cd "$(dirname "$0")/.."
export REGINA_DISK_HIGH_PCT="${REGINA_DISK_HIGH_PCT:-100}" REGINA_DISK_LOW_PCT="${REGINA_DISK_LOW_PCT:-99}"
bin="${CARGO_TARGET_DIR:-target}/release/regina"
[ -x "$bin" ] || cargo build --release --locked -p regina-server --bin regina
exec python3 scripts/soak.py --binary "$bin" "$@"
