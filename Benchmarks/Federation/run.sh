#!/usr/bin/env bash
# run.sh - a message from one host's publisher to another host's subscribers, through one nats-server, beside the
# same case within one daemon and beside plain NATS (the C harness of Benchmarks/Anchors/harness), in one run.
#
#   Benchmarks/Federation/run.sh                 REPS=5, 1 -> 1 and 1 -> 10
#   REPS=1 COUNT=100000 Benchmarks/Federation/run.sh
#
# Four rows per fan-out, the cases alternated within each repetition (the machine is shared and noisy: read the
# medians, and the ratios to plain NATS of the same run):
#   one daemon      notify bench on daemon L (no NATS), noretain
#   across hosts    notify bench publishing on daemon A, subscribing on daemon B (--subscribe-socket); A and B
#                   linked through the nats-server; noretain
#   across, retained  the same, retained (each message also written to the JetStream stream of latest messages)
#   plain NATS      the C harness's throughput and latency modes against the same nats-server
# Throughput: COUNT 16-byte messages, paced by a 4 MiB window (as the anchors); latency: one message at a time.
#
# Each linked host is a daemon and its fleet service (notifyd-fleet), as packaged.
#
# Environment: NOTIFYD, NOTIFY, NOTIFYD_FLEET (default: the release builds), RUN (scratch,
# default /tmp/notifyd-federation-bench), REPS, COUNT, LAT_MSGS; BRIDGE_OPTIONS, more options for both linked
# fleet services (BRIDGE_OPTIONS="--nats-catch-up 0": live only, without the log). Build first:
#   swift build -c release --product notifyd && swift build -c release --product notify \
#     && swift build -c release --product notifyd-fleet
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NOTIFYD=${NOTIFYD:-$REPO/.build/release/notifyd}
NOTIFY=${NOTIFY:-$REPO/.build/release/notify}
NOTIFYD_FLEET=${NOTIFYD_FLEET:-$REPO/.build/release/notifyd-fleet}
RUN=${RUN:-/tmp/notifyd-federation-bench}
REPS=${REPS:-5}
COUNT=${COUNT:-500000}
LAT_MSGS=${LAT_MSGS:-10000}

for bin in "$NOTIFYD" "$NOTIFY" "$NOTIFYD_FLEET"; do
	[ -x "$bin" ] || { echo "run.sh: $bin not found; build the release binaries first" >&2; exit 1; }
done
command -v nats-server >/dev/null || { echo "run.sh: nats-server missing: script/bootstrap --for-tests" >&2; exit 1; }
case $RUN in /|"$REPO"*) echo "run.sh: refusing RUN=$RUN" >&2; exit 1 ;; esac
rm -rf "$RUN"
mkdir -p "$RUN"

# The C harness, built in $RUN (gcc and make).
make -s -C "$REPO/Benchmarks/Anchors/harness" OUT="$RUN/harness" >/dev/null
HARNESS=$RUN/harness/bench

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_for() { # seconds, then a command that succeeds once ready
	local deadline=$((SECONDS + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { echo "run.sh: timed out waiting for: $*" >&2; exit 1; }
		sleep 0.05
	done
}

nats-server -a 127.0.0.1 -p -1 -js -sd "$RUN/jetstream" >"$RUN/nats.log" 2>&1 &
NATS_PID=$!
PIDS+=("$NATS_PID")
wait_for 10 grep -q 'Server is ready' "$RUN/nats.log"
PORT=$(grep -o 'client connections on 127.0.0.1:[0-9]*' "$RUN/nats.log" | head -n 1 | sed 's/.*://')
URL=nats://127.0.0.1:$PORT

start_daemon() { # name, then options
	local name=$1; shift
	"$NOTIFYD" --socket "$RUN/$name.sock" --state-dir "$RUN/$name.state" --config /dev/null --fleet-user "$(id -u)" "$@" \
		>"$RUN/$name.log" 2>&1 &
	PIDS+=("$!")
}
start_fleet() { # name (its daemon's), then options
	local name=$1; shift
	"$NOTIFYD_FLEET" --socket "$RUN/$name.sock" --config /dev/null "$@" >"$RUN/$name.fleet.log" 2>&1 &
	PIDS+=("$!")
}
start_daemon alpha
start_daemon beta
start_daemon lone
# The outbox holds a whole window of exports (262,144 messages of about 200 bytes encoded).
# shellcheck disable=SC2086
start_fleet alpha --nats "$URL" --host-name alpha --nats-outbox-bytes 268435456 ${BRIDGE_OPTIONS:-}
# shellcheck disable=SC2086
start_fleet beta --nats "$URL" --host-name beta ${BRIDGE_OPTIONS:-}
for name in alpha beta; do wait_for 20 grep -q 'read the latest messages' "$RUN/$name.fleet.log"; done
wait_for 20 test -S "$RUN/lone.sock"

RESULTS=$RUN/results.txt
: >"$RESULTS"
notify_case() { # label, subscribers, extra notify bench options
	local label=$1 subs=$2; shift 2
	"$NOTIFY" --socket "$RUN/${SOCKET_OF[$label]}.sock" bench --subscribers "$subs" --count "$COUNT" --latency-count "$LAT_MSGS" \
		--format json "$@" >"$RUN/last.json" 2>>"$RUN/bench.stderr" || true
	python3 - "$label" "$subs" "$RUN/last.json" >>"$RESULTS" <<'PY'
import json, sys
label, subs, path = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(path))
    t, l = r["throughput"], r["latency"]
    print(f"{label}|{subs}|{t['delivered_per_second']:.0f}|{l['p50_us']:.1f}|{l['p99_us']:.1f}|{r['lost']}")
except Exception as error:
    print(f"{label}|{subs}|nan|nan|nan|failed: {error}")
PY
}
nats_case() { # subscribers
	local subs=$1 thr lat
	thr=$("$HARNESS" throughput -P nats -a "tcp:127.0.0.1:$PORT" -n "$COUNT" -s 16 -c "$subs" -w 262144 -p "$NATS_PID" 2>>"$RUN/bench.stderr" | grep RESULT || true)
	lat=$("$HARNESS" latency -P nats -a "tcp:127.0.0.1:$PORT" -n "$LAT_MSGS" -s 16 -c "$subs" -p "$NATS_PID" 2>>"$RUN/bench.stderr" | grep RESULT || true)
	field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
	echo "plain NATS|$subs|$(field deliv_rate "$thr")|$(field p50_us "$lat")|$(field p99_us "$lat")|$(field lost "$thr")" >>"$RESULTS"
}
declare -A SOCKET_OF=(["one daemon"]=lone ["across hosts"]=alpha ["across, retained"]=alpha)

for rep in $(seq 1 "$REPS"); do
	for subs in 1 10; do
		notify_case "one daemon" "$subs" --no-retain
		notify_case "across hosts" "$subs" --no-retain --subscribe-socket "$RUN/beta.sock"
		nats_case "$subs"
		[ "$subs" = 1 ] && notify_case "across, retained" "$subs" --subscribe-socket "$RUN/beta.sock"
	done
	echo "run.sh: repetition $rep of $REPS done" >&2
done

python3 - "$RESULTS" "$REPS" "$COUNT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, subs, rate, p50, p99, lost = line.rstrip("\n").split("|")
    rows.setdefault((label, int(subs)), []).append((float(rate or "nan"), float(p50 or "nan"), float(p99 or "nan"), lost))
order = ["one daemon", "across hosts", "across, retained", "plain NATS"]
print(f"{sys.argv[2]} repetitions, {int(sys.argv[3]):,} messages of 16 bytes; medians (min-max)\n")
print("| case | subscribers | delivered msg/s | vs plain NATS | latency p50 µs | p99 µs | lost (all runs) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
for subs in (1, 10):
    nats = [r[0] for r in rows.get(("plain NATS", subs), [])]
    nats_median = statistics.median(nats) if nats else float("nan")
    for label in order:
        runs = rows.get((label, subs))
        if not runs:
            continue
        rate = [r[0] for r in runs]
        p50 = [r[1] for r in runs]
        p99 = [r[2] for r in runs]
        lost = ",".join(sorted(set(r[3] for r in runs)))
        m = statistics.median(rate)
        print(f"| {label} | {subs} | {m:,.0f} ({min(rate):,.0f}-{max(rate):,.0f}) | {m / nats_median:.2f} |"
              f" {statistics.median(p50):.1f} | {statistics.median(p99):.1f} | {lost} |")
PY
