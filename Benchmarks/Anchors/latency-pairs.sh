#!/usr/bin/env bash
# latency-pairs.sh - two to four builds of notifyd through the anchors harness's latency case, alternated in one run,
# so that a change in the tail is read from runs side by side on a shared, noisy machine, never from runs of
# different hours.
#
#   A=DIR B=DIR [C=DIR] [D=DIR] [REPS=5] [LAT_MSGS=20000] [PLACES="same any"] [SIZES="16 1024"] \
#       Benchmarks/Anchors/latency-pairs.sh
#   A=/tmp/old/bin B=.build/release Benchmarks/Anchors/latency-pairs.sh
#
# DIR holds a notifyd (or a script that execs one: Benchmarks/Anchors/probes). The daemons run at once, each on a
# socket and state directory of its own with its defaults, started as harness/servers.sh starts notifyd. Each round
# measures, for each payload size and placement, every build in turn (in the reverse order in every other round):
# the harness's `bench latency` (stamp, publish, wait until delivered, repeat), placed as phase_latency places it:
# `same` pins the daemon and the bench to CPU 0 (no wake-up crosses CPUs), `any` pins nothing, `split` puts the
# daemon on CPU 1 and the bench on CPU 0. Prints each build's median p50 and p99 (µs), its ratios to A's, each
# round's p99 and the daemon's CPU time per message; writes the raw RESULT lines to $RUN/pairs.txt.
#
# Environment: WORK (where bench is built, default /tmp/notifyd-latency-pairs/build), RUN (sockets, logs, raw
# results, default /tmp/notifyd-latency-pairs/run). Needs cc and make (harness/Makefile).
set -euo pipefail
: "${A:?A=DIR of the first build (holding notifyd)}" "${B:?B=DIR of the second build}"
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/notifyd-latency-pairs/build}
RUN=${RUN:-/tmp/notifyd-latency-pairs/run}
REPS=${REPS:-5}
LAT_MSGS=${LAT_MSGS:-20000}
# Messages sent before the recorded ones: the daemon's CPU time counts them too.
WARMUP=1000
PLACES=${PLACES:-"same any"}
SIZES=${SIZES:-"16 1024"}

declare -A DIR=([A]=$A [B]=$B)
NAMES=(A B)
for name in C D; do [ -n "${!name:-}" ] && { DIR[$name]=${!name}; NAMES+=("$name"); }; done
for name in "${NAMES[@]}"; do [ -x "${DIR[$name]}/notifyd" ] || { echo "latency-pairs: no ${DIR[$name]}/notifyd" >&2; exit 1; }; done
rm -rf "$RUN"
mkdir -p "$RUN" "$WORK"
make -s -C "$HERE/harness" OUT="$WORK"
BENCH=$WORK/bench

declare -A PID SOCK
start() { # start NAME DIR
	mkdir -p "$RUN/$1"
	"$2/notifyd" --socket "$RUN/$1/notifyd.sock" --state-dir "$RUN/$1/state" >>"$RUN/$1/notifyd.log" 2>&1 &
	PID[$1]=$!
	SOCK[$1]=$RUN/$1/notifyd.sock
	for _ in $(seq 200); do [ -S "${SOCK[$1]}" ] && return 0; sleep 0.05; done
	echo "latency-pairs: $2/notifyd did not start; see $RUN/$1/notifyd.log" >&2
	exit 1
}
stop() { for name in "${!PID[@]}"; do kill "${PID[$name]}" 2>/dev/null || true; wait "${PID[$name]}" 2>/dev/null || true; done; }
trap stop EXIT
for name in "${NAMES[@]}"; do start "$name" "${DIR[$name]}"; done
all=0-$(($(nproc) - 1))

measure() { # measure NAME SIZE PLACE ROUND
	local name=$1 size=$2 place=$3 round=$4 pin=()
	case $place in
	any) taskset -a -p -c "$all" "${PID[$name]}" >/dev/null ;;
	same) taskset -a -p -c 0 "${PID[$name]}" >/dev/null; pin=(taskset -c 0) ;;
	split) taskset -a -p -c 1 "${PID[$name]}" >/dev/null; pin=(taskset -c 0) ;;
	esac
	"${pin[@]}" "$BENCH" latency -P notifyd -a "unix:${SOCK[$name]}" -n "$LAT_MSGS" -W "$WARMUP" -s "$size" -p "${PID[$name]}" |
		grep '^RESULT' | sed "s/^RESULT /RESULT build=$name place=$place round=$round /" >>"$RUN/pairs.txt"
	taskset -a -p -c "$all" "${PID[$name]}" >/dev/null
}

for round in $(seq "$REPS"); do
	order=("${NAMES[@]}")
	((round % 2)) || order=($(printf '%s\n' "${NAMES[@]}" | tac))
	for size in $SIZES; do
		for place in $PLACES; do
			for name in "${order[@]}"; do measure "$name" "$size" "$place" "$round"; done
		done
	done
	echo "round $round of $REPS done" >&2
done

python3 - "$RUN/pairs.txt" "${NAMES[@]}" <<PY
import statistics, sys
dirs = {$(for name in "${NAMES[@]}"; do printf '"%s": "%s", ' "$name" "${DIR[$name]}"; done)}
names = sys.argv[2:]
rows = {}
for line in open(sys.argv[1]):
    fields = dict(f.split("=", 1) for f in line.split()[1:])
    key = (int(fields["payload"]), fields["place"])
    cpu_us = float(fields["srv_cpu_s"]) * 1e6 / (int(fields["msgs"]) + $WARMUP)
    rows.setdefault(key, {}).setdefault(fields["build"], []).append((float(fields["p50_us"]), float(fields["p99_us"]), cpu_us))
for name in names:
    print(f"{name} = {dirs[name]}")
print()
print("| payload B | place | build | p50 / p99 µs | / A p50 | / A p99 | daemon CPU µs per message | p99 by round |")
print("| ---: | --- | --- | ---: | ---: | ---: | ---: | --- |")
med = lambda runs, i: statistics.median(r[i] for r in runs)
for (size, place), builds in sorted(rows.items()):
    a = builds.get("A", [])
    for name in names:
        runs = builds.get(name, [])
        if not runs or not a:
            continue
        print(f"| {size} | {place} | {name} | {med(runs, 0):.1f} / {med(runs, 1):.1f}"
              f" | {med(runs, 0) / med(a, 0):.2f} | {med(runs, 1) / med(a, 1):.2f} | {med(runs, 2):.1f}"
              f" | {', '.join(f'{r[1]:.0f}' for r in runs)} |")
PY
