#!/usr/bin/env bash
# run.sh - what wildcard subscribers times topics costs the daemon: its memory with SUBS connections subscribed to
# `>` once TOPICS topics were published to, and once those connections are gone and the daemon is idle.
#
#   Benchmarks/WildcardSubscribers/run.sh           the release build; REPS=3
#   NOTIFYD=path/to/notifyd NOTIFY=path/to/notify Benchmarks/WildcardSubscribers/run.sh
#
# Each topic caches the connections its messages go to: without a bound, SUBS x TOPICS entries. Starts notifyd on a
# temporary socket (no history, so that only the lists and the topics count), starts SUBS `notify subscribe '>'`
# (output to /dev/null) and waits until the daemon counts their subscriptions; reads VmRSS; publishes one message
# without retaining it to each of wild.0 ... wild.<TOPICS-1> (ROUNDS times, in turn) over one connection; once every subscriber has read
# everything (`queued_bytes` 0 and `messages_out` steady) waits QUIET seconds (the daemon gives freed memory back
# after 5 to 10 s without work) and reads VmRSS and VmHWM: what it holds for those subscribers; stops them, waits
# QUIET seconds again (the lists, stale now, are let go then too) and reads VmRSS. The daemon's CPU time counts
# from the first publish until every subscriber has read everything. Prints one line per repetition and the
# medians. Environment: REPS (3), SUBS (200), TOPICS (10000), ROUNDS (1: each topic published this many times, in
# turn), QUIET (15).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NOTIFYD=${NOTIFYD:-$REPO/.build/release/notifyd}
NOTIFY=${NOTIFY:-$REPO/.build/release/notify}
REPS=${REPS:-3}
SUBS=${SUBS:-200}
TOPICS=${TOPICS:-10000}
ROUNDS=${ROUNDS:-1}
QUIET=${QUIET:-15}
for bin in "$NOTIFYD" "$NOTIFY"; do [ -x "$bin" ] || { echo "run.sh: $bin not found; build the release binaries" >&2; exit 1; }; done

. "$HERE/../Support/daemon.sh"
# The process's CPU time so far, user and system, in clock ticks.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
lines=()
for rep in $(seq 1 "$REPS"); do
	dir=$(mktemp -d /tmp/notifyd-wildcard.XXXXXX)
	start_daemon "$dir" --history-messages 0
	subscribers=()
	for _ in $(seq 1 "$SUBS"); do "$NOTIFY" --socket "$dir/s" subscribe '>' >/dev/null 2>&1 & subscribers+=($!); done
	wait_for "$dir/s" subscriptions "$SUBS"
	subscribed=$(field VmRSS $pid)
	# One message to each topic, over one connection; the PONG says the daemon handled them all.
	cpu_before=$(cpu $pid)
	python3 - "$dir/s" "$TOPICS" "$ROUNDS" <<'PY'
import socket, sys
connection = socket.socket(socket.AF_UNIX)
connection.connect(sys.argv[1])
round = b"".join(b"PUB wild.%d 1 noretain\nx\n" % i for i in range(int(sys.argv[2])))
connection.sendall(round * int(sys.argv[3]) + b"PING\n")
received = b""
while b"PONG" not in received:
    chunk = connection.recv(65536)
    if not chunk: sys.exit("run.sh: the daemon closed the connection: " + received.decode(errors="replace")[-200:])
    received += chunk
PY
	# Every subscriber has read everything once nothing waits for one and the count sent stays put.
	wait_for "$dir/s" queued_bytes 0
	sent=""
	while [ "$sent" != "$(counter "$dir/s" messages_out)" ]; do sent=$(counter "$dir/s" messages_out); sleep 0.5; done
	cpu_after=$(cpu $pid)
	sleep "$QUIET"   # idle: the trimmer's quiet spell, not a synchronisation
	published=$(field VmRSS $pid) peak=$(field VmHWM $pid)
	kill "${subscribers[@]}"; wait "${subscribers[@]}" 2>/dev/null || true
	wait_for "$dir/s" subscriptions 0
	sleep "$QUIET"   # idle: the trimmer's quiet spell, not a synchronisation
	gone=$(field VmRSS $pid)
	kill $pid; wait $pid 2>/dev/null || true
	rm -rf "$dir"
	seconds=$(python3 -c "import os; print(($cpu_after - $cpu_before) / os.sysconf('SC_CLK_TCK'))")
	lines+=("$subscribed $published $peak $gone $seconds")
	echo "rep $rep: subscribed ${subscribed} KiB, published and idle ${published} KiB (peak ${peak}), subscribers gone ${gone} KiB;" \
		"daemon CPU ${seconds} s"
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, line.split())) for line in sys.stdin if line.strip()]
m = [statistics.median(column) for column in zip(*rows)]
print(f"median: subscribed {m[0]/1024:.1f} MiB, published and idle {m[1]/1024:.1f} MiB (peak {m[2]/1024:.1f}), subscribers gone {m[3]/1024:.1f} MiB; daemon CPU {m[4]:.2f} s")
'
