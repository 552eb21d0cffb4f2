#!/usr/bin/env bash
# run.sh - the daemon's memory idle, at the peak of a 1 -> 1000 burst, and once idle again after it.
#
#   Benchmarks/IdleAfterBurst/run.sh                 the release build; REPS=3
#   NOTIFYD=path/to/notifyd NOTIFY=path/to/notify Benchmarks/IdleAfterBurst/run.sh
#
# Starts notifyd on a temporary socket, waits QUIET seconds (the daemon gives freed memory back after 5 to 10 s
# without work), reads VmRSS and RssAnon; runs `notify bench --subscribers 1000 --count COUNT --skip-latency`;
# reads VmHWM (the peak); waits QUIET seconds again and reads VmRSS and RssAnon. Prints one line per repetition
# and the medians. Environment: REPS (3), COUNT (200000), QUIET (15), WINDOW (2000: the messages the publisher may
# be ahead of the slowest subscriber. The bench's 1,000 subscribers are read by one thread, which the daemon
# outruns: with bench's default of 262,144 the queues reach the uid's budget of queued bytes and the daemon drops
# some 40% of the deliveries, announced, which is the budget at work rather than a burst that ends).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NOTIFYD=${NOTIFYD:-$REPO/.build/release/notifyd}
NOTIFY=${NOTIFY:-$REPO/.build/release/notify}
REPS=${REPS:-3}
COUNT=${COUNT:-200000}
QUIET=${QUIET:-15}
WINDOW=${WINDOW:-2000}
for bin in "$NOTIFYD" "$NOTIFY"; do [ -x "$bin" ] || { echo "run.sh: $bin not found; build the release binaries" >&2; exit 1; }; done

. "$HERE/../Support/daemon.sh"
lines=()
for rep in $(seq 1 "$REPS"); do
	dir=$(mktemp -d /tmp/notifyd-burst.XXXXXX)
	start_daemon "$dir"
	sleep "$QUIET"   # idle: the trimmer's quiet spell, not a synchronisation
	idle=$(field VmRSS $pid) idle_anon=$(field RssAnon $pid)
	"$NOTIFY" --socket "$dir/s" bench --subscribers 1000 --count "$COUNT" --window "$WINDOW" --skip-latency >"$dir/bench" 2>&1 || true
	peak=$(field VmHWM $pid)
	sleep "$QUIET"
	after=$(field VmRSS $pid) after_anon=$(field RssAnon $pid)
	kill $pid; wait $pid 2>/dev/null || true
	grep -q "^OK" "$dir/bench" || echo "run.sh: the bench did not end OK: $(tail -n 1 "$dir/bench")" >&2
	rm -rf "$dir"
	lines+=("$idle $idle_anon $peak $after $after_anon")
	echo "rep $rep: idle ${idle} KiB (anon ${idle_anon}), peak ${peak} KiB, after ${after} KiB (anon ${after_anon})"
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
rows = [list(map(int, line.split())) for line in sys.stdin if line.strip()]
m = [statistics.median(column) for column in zip(*rows)]
print(f"median: idle {m[0]/1024:.1f} MiB (anon {m[1]/1024:.1f}), peak {m[2]/1024:.1f} MiB, after {m[3]/1024:.1f} MiB (anon {m[4]/1024:.1f}); after/idle {m[3]/m[0]:.2f}")
'
