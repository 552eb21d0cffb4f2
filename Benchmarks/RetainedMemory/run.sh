#!/usr/bin/env bash
# RSS per retained topic: a release notifyd, 100,000 topics with one retained 16-byte message each, RSS from /proc
# before and after. Prints one line per run. Extra arguments go to notifyd (e.g. --history-messages 64).
#   swift build -c release --product notifyd && Benchmarks/RetainedMemory/run.sh [notifyd options]
# NOTIFYD names another binary (a packaged /usr/sbin/notifyd, say); TOPICS and REPS change the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
NOTIFYD=${NOTIFYD:-.build/release/notifyd}
TOPICS=${TOPICS:-100000}
REPS=${REPS:-3}
for _ in $(seq "$REPS"); do
    dir=$(mktemp -d)
    "$NOTIFYD" --socket "$dir/s" --state-dir "$dir/state" --config /dev/null "$@" 2>"$dir/log" &
    pid=$!
    for _ in $(seq 200); do [ -S "$dir/s" ] && break; sleep 0.05; done
    before=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    python3 - "$dir/s" "$TOPICS" <<'PY'
import socket, sys
path, count = sys.argv[1], int(sys.argv[2])
connection = socket.socket(socket.AF_UNIX)
connection.connect(path)
connection.sendall(b"".join(b"PUB mem.t%d 16\n%s\n" % (i, b"x" * 16) for i in range(count)) + b"#1 PING\n")
received = b""
while b"#1 PONG" not in received:
    received += connection.recv(65536)
PY
    after=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    echo "RSS $before KiB idle, $after KiB with $TOPICS topics: $(( (after - before) * 1024 / TOPICS )) B per topic"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
done
