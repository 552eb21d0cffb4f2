#!/usr/bin/env bash
# Alternates two builds of notifyd under the same `notify bench` run, PAIRS times, and prints for each run the
# deliveries per second, the messages lost and the daemon's CPU seconds (from /proc/PID/stat): a change's cost on a
# shared, noisy machine is read from pairs run side by side, as medians, never from one run.
#
#   A=DIR B=DIR [PAIRS=3] Benchmarks/Pairs/run.sh [notify bench options...]
#   A=.build/release B=/tmp/base/.build/release Benchmarks/Pairs/run.sh --count 2000000
#
# DIR holds notifyd and notify. Each daemon starts with its defaults (history and the state log on) on a socket
# and state directory of its own, and is stopped after its run.
set -euo pipefail
: "${A:?A=DIR of the first build}" "${B:?B=DIR of the second build}"
pairs=${PAIRS:-3}

run() {
    local bin=$1; shift
    local dir
    dir=$(mktemp -d)
    "$bin/notifyd" --socket "$dir/s" --state-dir "$dir/state" --config /dev/null >"$dir/log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do [ -S "$dir/s" ] && break; sleep 0.05; done
    local out
    # Exit 1 is a run that lost messages: a result (printed as such), not a failure of the script.
    out=$("$bin/notify" --socket "$dir/s" bench --skip-latency --format json "$@" 2>/dev/null) || [ $? -eq 1 ]
    local ticks
    ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    python3 -c 'import json, sys
d = json.loads(sys.argv[1]); rate = d["throughput"].get("delivered_per_second", 0); lost = d["lost"]; cpu = int(sys.argv[2]) / 100
print("%12.0f deliveries/s  lost %7d  daemon CPU %.2f s" % (rate, lost, cpu))' "$out" "$ticks"
}

for pair in $(seq "$pairs"); do
    # Alternate which goes first, so neither always runs on a warmer machine.
    if [ $((pair % 2)) -eq 1 ]; then order=(A B); else order=(B A); fi
    for which in "${order[@]}"; do
        printf '%s pair %d: ' "$which" "$pair"
        run "${!which}" "$@"
    done
done
