#!/usr/bin/env bash
# caught-up.sh - the daemon's memory after a subscriber that stays connected fell far behind and caught up.
#
#   Benchmarks/IdleAfterBurst/caught-up.sh          the release build; REPS=3
#   NOTIFYD=path/to/notifyd NOTIFY=path/to/notify Benchmarks/IdleAfterBurst/caught-up.sh
#
# Starts notifyd on a temporary socket (no history), one `notify subscribe t` (output to /dev/null), waits until the
# daemon counts its subscription and stops it (SIGSTOP); waits QUIET seconds and reads VmRSS (idle); publishes COUNT
# 16-byte messages to t without retaining them over one connection, all at once until PONG (ONE_AT_A_TIME=1: each
# with `ack`, waiting for its OK, so that each is a batch of its own); reads `queued_bytes` and VmRSS;
# lets the subscriber go on (SIGCONT), waits until nothing is queued for it, then QUIET seconds (the daemon gives
# back what it keeps after 5 to 10 s without work), and reads VmRSS. Past its limits the subscriber is dropped
# messages, and says so on its standard error (shown). Prints one line per repetition and the medians.
# Environment: REPS (3), COUNT (1000000), ONE_AT_A_TIME (0), QUIET (15).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NOTIFYD=${NOTIFYD:-$REPO/.build/release/notifyd}
NOTIFY=${NOTIFY:-$REPO/.build/release/notify}
REPS=${REPS:-3}
COUNT=${COUNT:-1000000}
ONE_AT_A_TIME=${ONE_AT_A_TIME:-0}
QUIET=${QUIET:-15}
for bin in "$NOTIFYD" "$NOTIFY"; do [ -x "$bin" ] || { echo "caught-up.sh: $bin not found; build the release binaries" >&2; exit 1; }; done

. "$HERE/../Support/daemon.sh"
lines=()
for rep in $(seq 1 "$REPS"); do
	dir=$(mktemp -d /tmp/notifyd-caught-up.XXXXXX)
	start_daemon "$dir" --history-messages 0
	"$NOTIFY" --socket "$dir/s" subscribe t >/dev/null &
	subscriber=$!
	wait_for "$dir/s" subscriptions 1
	kill -STOP $subscriber
	sleep "$QUIET"   # idle: the trimmer's quiet spell, not a synchronisation
	idle=$(field VmRSS $pid)
	python3 - "$dir/s" "$COUNT" "$ONE_AT_A_TIME" <<'PY'
import socket, sys
connection = socket.socket(socket.AF_UNIX)
connection.connect(sys.argv[1])
received = b""
def await_line(word):
    global received
    while word not in received:
        chunk = connection.recv(65536)
        if not chunk: sys.exit("caught-up.sh: the daemon closed the connection")
        received += chunk
    received = received[received.index(word) + len(word):]
if sys.argv[3] == "1":
    for _ in range(int(sys.argv[2])):
        connection.sendall(b"PUB t 16 noretain ack\n0123456789abcdef\n")
        await_line(b"OK")
else:
    connection.sendall(b"PUB t 16 noretain\n0123456789abcdef\n" * int(sys.argv[2]) + b"PING\n")
    await_line(b"PONG")
PY
	queued=$(counter "$dir/s" queued_bytes) behind=$(field VmRSS $pid)
	kill -CONT $subscriber
	wait_for "$dir/s" queued_bytes 0
	sleep "$QUIET"
	after=$(field VmRSS $pid)
	kill $subscriber $pid; wait $subscriber $pid 2>/dev/null || true
	rm -rf "$dir"
	lines+=("$idle $queued $behind $after")
	echo "rep $rep: idle ${idle} KiB; ${queued} B queued, ${behind} KiB; caught up and idle ${after} KiB"
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
rows = [list(map(int, line.split())) for line in sys.stdin if line.strip()]
m = [statistics.median(column) for column in zip(*rows)]
print(f"median: idle {m[0]/1024:.1f} MiB; {m[1]/2**20:.1f} MiB queued, {m[2]/1024:.1f} MiB; caught up and idle {m[3]/1024:.1f} MiB; after/idle {m[3]/m[0]:.2f}")
'
