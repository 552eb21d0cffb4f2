#!/usr/bin/env bash
# run.sh - what a client that pipelines small requests without reading the replies costs the daemon.
#
#   Benchmarks/UnreadReplies/run.sh                 the release build; REPS=3
#   NOTIFYD=path/to/notifyd Benchmarks/UnreadReplies/run.sh
#
# Starts notifyd on a temporary socket, waits QUIET seconds and reads VmRSS (idle); a Python client writes COUNT
# `PING`s as fast as the socket takes them, reading nothing, until the daemon has stopped reading it for 3 s or
# everything is written; reads VmHWM (the peak) and VmRSS; the client then reads every `PONG` and stays connected;
# after QUIET seconds (the daemon gives back what it keeps after 5 to 10 s without work) reads VmRSS again. Prints
# one line per repetition and the medians. Environment: REPS (3), COUNT (4000000), QUIET (15).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NOTIFYD=${NOTIFYD:-$REPO/.build/release/notifyd}
REPS=${REPS:-3}
COUNT=${COUNT:-4000000}
QUIET=${QUIET:-15}
[ -x "$NOTIFYD" ] || { echo "run.sh: $NOTIFYD not found; build the release binaries" >&2; exit 1; }

. "$HERE/../Support/daemon.sh"

lines=()
for rep in $(seq 1 "$REPS"); do
	dir=$(mktemp -d /tmp/notifyd-unread.XXXXXX)
	start_daemon "$dir"
	line=$(python3 - "$dir/s" "$pid" "$COUNT" "$QUIET" <<'PY'
import select, socket, sys, time
path, pid, count, quiet = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def field(name):
    status = open(f"/proc/{pid}/status").read()
    return int(status.split(name + ":")[1].split()[0])
time.sleep(quiet)   # idle: the trimmer's quiet spell, not a synchronisation
idle = field("VmRSS")
connection = socket.socket(socket.AF_UNIX)
connection.connect(path)
connection.setblocking(False)
requests = memoryview(b"PING\n" * count)
while requests:
    if not select.select([], [connection], [], 3)[1]:
        break   # the daemon stopped reading: it holds as much as it will
    try:
        requests = requests[connection.send(requests):]
    except BlockingIOError:
        pass
written = count - len(requests) // 5
peak, full = field("VmHWM"), field("VmRSS")
connection.setblocking(True)
pongs, tail = 0, b""
while pongs < written:
    chunk = connection.recv(1 << 20)
    if not chunk:
        sys.exit("run.sh: the daemon closed the connection")
    # A PONG may be cut between two reads.
    text = tail + chunk
    pongs += text.count(b"PONG\n")
    tail = text[-4:] if not text.endswith(b"\n") else b""
time.sleep(quiet)
print(idle, written, peak, full, field("VmRSS"))
PY
)
	kill $pid; wait $pid 2>/dev/null || true
	rm -rf "$dir"
	lines+=("$line")
	read -r idle written peak full after <<<"$line"
	echo "rep $rep: idle ${idle} KiB; ${written} PINGs written unread: peak ${peak} KiB, ${full} KiB; all read, idle ${after} KiB"
done
printf '%s\n' "${lines[@]}" | python3 -c '
import statistics, sys
rows = [list(map(int, line.split())) for line in sys.stdin if line.strip()]
m = [statistics.median(column) for column in zip(*rows)]
print(f"median: idle {m[0]/1024:.1f} MiB; {m[1]:.0f} PINGs unread: peak {m[2]/1024:.1f} MiB; all read, idle {m[4]/1024:.1f} MiB")
'
