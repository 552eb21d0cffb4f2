#!/usr/bin/env bash
# cpu.sh - where the CPU goes across hosts (issue 47): two hosts (a daemon and its fleet service each, catch-up on)
# on one nats-server, `notify bench` publishing on alpha and subscribing on beta, and the CPU each of the five
# processes on the path spends per message delivered (user + system, from /proc). On a machine where they share a
# few cores, the rate across hosts is about the cores over the sum of these.
#
#   swift build -c release --product notifyd && swift build -c release --product notify \
#     && swift build -c release --product notifyd-fleet
#   NOTIFYD=.build/release/notifyd NOTIFY=.build/release/notify NOTIFYD_FLEET=.build/release/notifyd-fleet \
#     REPS=3 Benchmarks/Federation/cpu.sh
#
# Environment: NOTIFYD, NOTIFY, NOTIFYD_FLEET (default: the packaged binaries), COUNT (1,000,000), REPS (3), RUN
# (scratch), BENCH_OPTIONS (default --no-retain), PERF=1 (a perf record of the five, in $RUN/perf-<rep>.data).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
COUNT=${COUNT:-1000000}
REPS=${REPS:-3}
RUN=${RUN:-/tmp/notifyd-federation-cpu}
NAME=Federation/cpu.sh
# shellcheck source=../Support/fleet.sh
source "$REPO/Benchmarks/Support/fleet.sh"

echo "| run | delivered msg/s | lost | p50 µs | nats-server | alpha daemon | alpha fleet | beta fleet | beta daemon | sum |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for rep in $(seq 1 "$REPS"); do
	dir=$RUN/$rep
	mkdir -p "$dir"
	PIDS_BEFORE=${#PIDS[@]}
	start_nats
	for host in alpha beta; do
		"$NOTIFYD" --socket "$dir/$host.sock" --state-dir "$dir/$host.state" --config /dev/null --fleet-user "$(id -u)" \
			>"$dir/$host.log" 2>&1 &
		PIDS+=("$!")
		eval "${host}_daemon=$!"
	done
	wait_for 10 test -S "$dir/alpha.sock" -a -S "$dir/beta.sock"
	for host in alpha beta; do
		# The sender's outbox holds a whole run: what is measured is the path, not the outbox's bound.
		"$NOTIFYD_FLEET" --socket "$dir/$host.sock" --config /dev/null --state-dir "$dir/$host.fleet" \
			--nats "nats://127.0.0.1:$PORT" --host-name "$host" --nats-outbox-bytes 268435456 >"$dir/$host.fleet.log" 2>&1 &
		PIDS+=("$!")
		eval "${host}_fleet=$!"
	done
	for host in alpha beta; do wait_for 60 grep -q 'read the latest messages' "$dir/$host.fleet.log"; done
	# shellcheck disable=SC2154 # set by eval above
	processes=("$NATS" "$alpha_daemon" "$alpha_fleet" "$beta_fleet" "$beta_daemon")
	before=()
	for pid in "${processes[@]}"; do before+=("$(cpu "$pid")"); done
	if [ -n "${PERF:-}" ]; then
		perf record -F 999 -g -o "$RUN/perf-$rep.data" -p "$(IFS=,; echo "${processes[*]}")" >/dev/null 2>&1 &
		perf_pid=$!
	fi
	# shellcheck disable=SC2086 # options are words
	"$NOTIFY" --socket "$dir/alpha.sock" bench --subscribers 1 --count "$COUNT" --latency-count 2000 ${BENCH_OPTIONS:---no-retain} \
		--subscribe-socket "$dir/beta.sock" --format json >"$dir/bench.json"
	[ -n "${PERF:-}" ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
	after=()
	for pid in "${processes[@]}"; do after+=("$(cpu "$pid")"); done
	python3 - "$dir/bench.json" "$COUNT" "$TICKS" "$rep" "${before[*]}" "${after[*]}" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
count, ticks, rep = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
spent = [(int(a) - int(b)) / ticks * 1e6 / count for b, a in zip(sys.argv[5].split(), sys.argv[6].split())]
cells = " | ".join(f"{us:.2f} µs" for us in spent)
print(f"| {rep} | {result['throughput']['delivered_per_second']:,.0f} | {result['lost']} | {result['latency']['p50_us']:.0f} | {cells} | {sum(spent):.2f} µs |")
PY
	# Stop this repetition's processes before the next starts: each run alone on the machine.
	for pid in "${PIDS[@]:$PIDS_BEFORE}"; do kill "$pid" 2>/dev/null || true; done
	wait "${PIDS[@]:$PIDS_BEFORE}" 2>/dev/null || true
	PIDS=("${PIDS[@]:0:$PIDS_BEFORE}")
	rm -rf "$RUN/jetstream"
done
echo "(CPU per message delivered, user + system, of each process over the whole bench: throughput and latency phases)"
