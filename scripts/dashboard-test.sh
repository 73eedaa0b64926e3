#!/usr/bin/env bash
# The dashboard's browser test (scripts/dashboard-test.py) with what it
# needs: Chromium from apt-get when `chromium` is missing, and the pinned
# playwright package in a virtualenv under the target dir (it drives the
# system's Chromium; no browser is downloaded).
# usage: scripts/dashboard-test.sh [--binary PATH] [--screenshots DIR] ...
# (default binary: ${CARGO_TARGET_DIR:-target}/release/regina, built if missing)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
PLAYWRIGHT_VERSION=1.63.0

if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "dashboard-test: chromium is missing and there is no sudo" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get install -y chromium || { $sudo apt-get update && $sudo apt-get install -y chromium; }
fi

venv="$target/dashboard-venv"
if ! "$venv/bin/python" -c "import playwright, sys; from importlib.metadata import version; sys.exit(version('playwright') != '$PLAYWRIGHT_VERSION')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
fi

args=("$@")
if [[ " ${args[*]-} " != *" --binary "* ]]; then
  bin="$target/release/regina"
  [ -x "$bin" ] || (cd "$root" && cargo build --release --locked -p regina-server --bin regina)
  args+=(--binary "$bin")
fi
exec timeout 300 "$venv/bin/python" "$root/scripts/dashboard-test.py" "${args[@]}"
