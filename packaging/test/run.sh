#!/usr/bin/env bash
# The packaging tests: build the .deb, lint it, check its contents, then install it under a real systemd
# (systemd-e2e.sh) and check the service there. Needs root for dpkg tools and systemd-nspawn: run as anyone else, it
# fails rather than pass without having tested the package. NOTIFYD_SKIP_PACKAGING_TESTS=1 skips it on purpose
# (exit 0, saying so), as root or not.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${NOTIFYD_SKIP_PACKAGING_TESTS:-}" = 1 ]; then
  echo "packaging tests: skipped, as NOTIFYD_SKIP_PACKAGING_TESTS=1 asks" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "packaging tests: they need root (dpkg, systemd-nspawn): run script/test as root, or set" \
    "NOTIFYD_SKIP_PACKAGING_TESTS=1 to skip them on purpose" >&2
  exit 1
fi
command -v lintian >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lintian >/dev/null; }

# The files are what a release ships; only xz's level is lower (4 s instead of 33 s, 52 MB instead of 45 MB).
deb=$(NOTIFYD_DEB_COMPRESSION="${NOTIFYD_DEB_COMPRESSION:--Zxz -z1}" packaging/build-deb.sh)
# lintian (single-threaded, some 10 s) runs beside the rest; its verdict is waited for at the end.
lintian_log=$(mktemp)
lintian_pid=""
trap '[ -z "$lintian_pid" ] || kill "$lintian_pid" 2>/dev/null; rm -f "$lintian_log"' EXIT
lintian --fail-on error,warning "$deb" >"$lintian_log" 2>&1 &
lintian_pid=$!
echo "== contents of $deb"
packaging/test/check-deb.sh "$deb"
echo "== $deb under a real systemd"
packaging/test/systemd-e2e.sh "$deb"
echo "== lintian $deb"
lintian_status=0
wait "$lintian_pid" || lintian_status=$?
lintian_pid=""
cat "$lintian_log"
[ "$lintian_status" -eq 0 ] || { echo "packaging tests: lintian failed ($lintian_status)" >&2; exit 1; }
