#!/usr/bin/env bash
# Benchmarks/Pipeline/run.sh - `notify subscribe` as a shell pipeline meets it (issue 36).
#
#   BIN=DIR RUNS=N LINES=N FORMATS="raw line json" Benchmarks/Pipeline/run.sh
#
# For each format, RUNS times, on a release daemon with its defaults (BIN: where notifyd and notify are; the
# package's .build/release by default): `notify subscribe 'pipe.>' --format F > file` runs while
# `seq 1 LINES | notify send pipe.x --lines --no-retain` publishes, then an end marker; alone, and beside a stalled
# subscriber (SIGSTOP). Prints how many of the LINES it wrote, the drops it was told of, and its lines per second
# from the first publish to the end marker in its file (which the publisher bounds); and its capacity, lines per
# second of the CPU time it used (user + system), which is what it could take with a core of its own; then the
# medians.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$root/.build/release}
RUNS=${RUNS:-3}
LINES=${LINES:-1000000}
FORMATS=${FORMATS:-raw line json}
NOTIFYD=$BIN/notifyd
NOTIFY=$BIN/notify
source "$root/Benchmarks/Support/daemon.sh"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }

work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$work"' EXIT

# cpu PID: the user and system time PID used so far, in seconds
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }

# run FORMAT STALLED: one run; prints "printed drops rate capacity"
run() {
	local format=$1 stalled=$2 healthy quiet=
	rm -rf "$work/d" && mkdir -p "$work/d"
	start_daemon "$work/d"
	local sock=$work/d/s
	"$NOTIFY" --socket "$sock" subscribe 'pipe.>' --format "$format" >"$work/out" 2>"$work/err" &
	healthy=$!
	local expected=1
	if [ "$stalled" = yes ]; then
		"$NOTIFY" --socket "$sock" subscribe 'pipe.>' --format raw >/dev/null 2>&1 &
		quiet=$!
		expected=2
	fi
	wait_for "$sock" subscriptions "$expected"
	[ -n "$quiet" ] && kill -STOP "$quiet"
	local start end
	start=$(now)
	seq 1 "$LINES" | "$NOTIFY" --socket "$sock" send pipe.x --lines --no-retain
	"$NOTIFY" --socket "$sock" send pipe.end END --no-retain
	for _ in $(seq 1 6000); do tail -c 200 "$work/out" | grep -q END && break; sleep 0.01; done
	end=$(now)
	local used
	used=$(cpu "$healthy")
	kill "$healthy" 2>/dev/null || true
	[ -n "$quiet" ] && { kill -CONT "$quiet"; kill "$quiet" 2>/dev/null || true; }
	kill "$pid"; wait "$pid" 2>/dev/null || true
	local lines drops
	if [ "$format" = json ]; then
		drops=$(grep -c '"dropped"' "$work/out" || true)
		lines=$(( $(grep -c . "$work/out" || true) - drops - 1 ))
	else
		drops=$(grep -c dropped "$work/err" || true)
		lines=$(( $(grep -c . "$work/out" || true) - 1 ))
	fi
	awk -v n="$lines" -v d="$drops" -v s="$start" -v e="$end" -v c="$used" \
		'BEGIN { printf "%d %d %.0f %.0f\n", n, d, n / (e - s), (c > 0 ? n / c : 0) }'
}

for format in $FORMATS; do
	for stalled in no yes; do
		printed=() rates=() capacities=()
		for r in $(seq 1 "$RUNS"); do
			read -r lines drops rate capacity < <(run "$format" "$stalled")
			printed+=("$lines") rates+=("$rate") capacities+=("$capacity")
			echo "$format, stalled one beside: $stalled, run $r: wrote $lines of $LINES ($drops drop notices), $rate lines/s, $capacity lines per CPU second"
		done
		echo "$format, stalled one beside: $stalled: median wrote $(printf '%s\n' "${printed[@]}" | median) of $LINES," \
			"$(printf '%s\n' "${rates[@]}" | median) lines/s, $(printf '%s\n' "${capacities[@]}" | median) lines per CPU second"
	done
done
