#!/usr/bin/env bash
# wrap.sh OUT BINARY PROBE [STATE_PARENT] - makes OUT/notifyd, which runs BINARY (a packaged notifyd) with
# state-log-probe.so preloaded and NOTIFYD_PROBE=PROBE (drop, map, prealloc, keepsize, ring, or pass for none), for latency-pairs.sh:
#
#   Benchmarks/Anchors/probes/wrap.sh /tmp/probe/drop $PWD/.build-pkg/…/release/notifyd drop
#   A=/tmp/probe/pass B=/tmp/probe/drop C=/tmp/probe/map Benchmarks/Anchors/latency-pairs.sh
#
# With STATE_PARENT the daemon's --state-dir is moved under it (say /dev/shm: the log on tmpfs, no disk below).
set -euo pipefail
out=$1 binary=$2 probe=$3 parent=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cc -O2 -shared -fPIC -o "$out/state-log-probe.so" "$here/state-log-probe.c" -ldl
cat >"$out/notifyd" <<SCRIPT
#!/usr/bin/env bash
args=()
while [ \$# -gt 0 ]; do
	if [ "\$1" = --state-dir ] && [ -n "$parent" ]; then args+=(--state-dir "$parent/\$(basename "$out")-state"); shift 2
	else args+=("\$1"); shift; fi
done
[ -z "$parent" ] || rm -rf "$parent/\$(basename "$out")-state"
LD_PRELOAD=$out/state-log-probe.so NOTIFYD_PROBE=$probe exec $binary "\${args[@]}"
SCRIPT
chmod +x "$out/notifyd"
