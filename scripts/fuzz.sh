#!/usr/bin/env bash
# A timed coverage-guided campaign over every decoder Regina reads outside
# bytes with (crates/server/src/http/fuzz_targets.rs), with libFuzzer through
# cargo fuzz on the nightly toolchain.
#
# usage: scripts/fuzz.sh [seconds-per-target] [target ...]   (default 60, all)
#
# Each target starts from fuzz/corpus/<target> and keeps what it learns there
# (minimised afterwards). An input that crashes a target is copied to
# fuzz/regressions/<target>/, which the test command replays
# (crates/server/tests/fuzz_corpus.rs) once the bug is fixed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(ls fuzz_targets | sed 's/\.rs$//')
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
jobs="${FUZZ_JOBS:-1}"
status=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "fuzz: $t for ${seconds}s"
  if ! cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 \
      -max_len=65536 -jobs="$jobs" -workers="$jobs" -artifact_prefix="artifacts/$t/" 2>&1 | tail -n 5; then
    status=1
  fi
  for crash in artifacts/"$t"/*; do
    [ -f "$crash" ] || continue
    mkdir -p "regressions/$t"
    cp "$crash" "regressions/$t/"
    echo "fuzz: $t found $(basename "$crash"), kept in fuzz/regressions/$t/"
    status=1
  done
  cargo +nightly fuzz cmin "$t" "corpus/$t" >/dev/null 2>&1 || true
done
exit $status
