#!/usr/bin/env bash
# Builds the Debian package with cargo-deb (installed from the crate
# registry when missing) from the release binary, checks its contents, its
# control fields and its systemd unit, installs it, starts the packaged
# binary the way the unit does (as its user, with its EnvironmentFile) and
# asks /health, then removes the package again. Needs root (dpkg -i).
# Prints "N/N deb checks passed".
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo_deb_version="3.8.0"
checks=0
pass() { checks=$((checks + 1)); echo "ok: $*"; }
fail() { echo "deb-test: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "installing the package needs root"
command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing"
# What the package depends on and the checks use, on a machine that lacks them.
command -v adduser >/dev/null || { apt-get update -qq && apt-get install -y -qq adduser; }
command -v setpriv >/dev/null || { apt-get update -qq && apt-get install -y -qq util-linux; }
command -v xz >/dev/null || { apt-get update -qq && apt-get install -y -qq xz-utils; }
tools="$target/tools"
# Each check reads a whole output before matching: with pipefail, a `grep -q`
# that stops reading early can fail its pipeline through the writer's SIGPIPE.
if ! grep -q "$cargo_deb_version" <<<"$("$tools/bin/cargo-deb" --version 2>/dev/null || true)"; then
  # Without its default features (liblzma built from C, ELF debug ids) it
  # builds in less time, and compresses with the system's xz.
  cargo install --locked --quiet --no-default-features --root "$tools" --version "=$cargo_deb_version" cargo-deb
fi
(cd "$root" && cargo build --release --locked -p regina-server --bin regina >/dev/null)
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$root" && "$tools/bin/cargo-deb" -p regina-server --no-build --quiet --output "$out/regina.deb")
deb="$out/regina.deb"
[ -s "$deb" ] || fail "cargo deb wrote no package"
pass "cargo deb built $(basename "$deb") ($(stat -c %s "$deb") bytes)"

# Contents.
listing="$(dpkg-deb -c "$deb")"
for f in ./usr/bin/regina ./etc/regina/regina.env ./usr/lib/systemd/system/regina.service \
         ./usr/share/doc/regina/README.md ./usr/share/doc/regina/queen-settings.md; do
  grep -q " $f\$" <<<"$listing" || fail "the package lacks $f"
done
grep -q 'rwxr-xr-x.* ./usr/bin/regina$' <<<"$listing" || fail "usr/bin/regina is not executable"
pass "the package holds the binary, the settings, the unit and the docs"
info="$(dpkg-deb -f "$deb")"
grep -q '^Package: regina$' <<<"$info" || fail "Package is not regina"
grep -q '^Depends:.*libc6' <<<"$info" || fail "Depends does not name libc6"
dpkg-deb -e "$deb" "$out/control"
[ -f "$out/control/conffiles" ] || fail "no conffiles"
grep -qx '/etc/regina/regina.env' "$out/control/conffiles" || fail "regina.env is not a conffile"
grep -q 'useradd\|adduser' "$out/control/postinst" || fail "postinst creates no user"
grep -q 'deb-systemd-helper\|systemctl' "$out/control/postinst" || fail "postinst does not enable the unit"
pass "control fields, conffiles and maintainer scripts"

# The unit file.
dpkg-deb -x "$deb" "$out/tree"
unit="$out/tree/usr/lib/systemd/system/regina.service"
for line in 'ExecStart=/usr/bin/regina' 'EnvironmentFile=/etc/regina/regina.env' 'User=regina' \
            'StateDirectory=regina' 'WantedBy=multi-user.target'; do
  grep -qx "$line" "$unit" || fail "the unit lacks $line"
done
grep -qx 'REGINA_DATA_DIR=/var/lib/regina' "$out/tree/etc/regina/regina.env" || fail "the settings name no /var/lib/regina"
pass "the unit runs /usr/bin/regina as regina with /etc/regina/regina.env, data in /var/lib/regina"

# Install, and start what the unit starts.
if dpkg -s regina >/dev/null 2>&1; then fail "a regina package is installed already; remove it first"; fi
port="$(sed -n 's/^REGINA_PORT=//p' "$out/tree/etc/regina/regina.env")"
if curl -s -o /dev/null "http://127.0.0.1:$port/health"; then fail "port $port is in use"; fi
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  dpkg --purge regina >/dev/null 2>&1 || true
  rm -rf /var/lib/regina "$out"
}
trap cleanup EXIT
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >/dev/null
[ -x /usr/bin/regina ] || fail "dpkg -i installed no /usr/bin/regina"
getent passwd regina >/dev/null || fail "the package made no regina user"
[ -d /var/lib/regina ] && [ "$(stat -c %U /var/lib/regina)" = regina ] || fail "/var/lib/regina is not regina's"
[ "$(stat -c %a /etc/regina/regina.env)" = 640 ] || fail "regina.env is readable by everyone"
pass "dpkg -i: binary, user regina, /var/lib/regina owned by it"
if command -v systemd-analyze >/dev/null && systemd-analyze verify /usr/lib/systemd/system/regina.service 2>"$out/verify.log"; then
  pass "systemd-analyze verify accepts the unit"
else
  echo "note: systemd-analyze verify could not check the unit here: $(head -c 300 "$out/verify.log" 2>/dev/null)"
fi
# As systemd would: the unit's user, only the EnvironmentFile's settings.
env_args=()
while IFS= read -r line; do
  case "$line" in ''|'#'*) ;; *) env_args+=("$line") ;; esac
done < /etc/regina/regina.env
log="$out/regina.log"
setpriv --reuid=regina --regid=regina --init-groups env -i "${env_args[@]}" /usr/bin/regina >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" >"$out/health.json" 2>/dev/null && break
  sleep 0.1
done
python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); assert h["status"]=="healthy", h' "$out/health.json" \
  || { cat "$log" >&2; fail "the packaged binary did not answer /health"; }
[ -d /var/lib/regina/raft ] || fail "the node did not keep its data in /var/lib/regina"
pass "the packaged binary started from the packaged settings, answered /health, and keeps its data in /var/lib/regina"
kill -TERM "$pid"
wait "$pid" || fail "the node did not stop cleanly on SIGTERM"
pid=""
pass "SIGTERM stops it cleanly"
dpkg --purge regina >/dev/null
! getent passwd regina >/dev/null || fail "purge left the regina user"
[ ! -e /usr/bin/regina ] || fail "purge left /usr/bin/regina"
pass "dpkg --purge removes it"
echo "$checks/$checks deb checks passed"
