#!/usr/bin/env bash
# RSS per retained topic: a release notifyd, 100,000 topics with one retained 16-byte message each, RSS from /proc
# before and after. Prints one line per run. Extra arguments go to notifyd (e.g. --history-messages 0).
#   swift build -c release --product notifyd && Benchmarks/RetainedMemory/run.sh [notifyd options]
# NOTIFYD names another binary (a packaged /usr/sbin/notifyd, say); TOPICS and REPS change the run. MESSAGES (1)
# publishes that many messages to each topic, round after round, for what a full history costs: with MESSAGES=64
# and the default history every topic keeps 64, and the line also gives the bytes per message (all of it over
# topics times messages).
set -euo pipefail
cd "$(dirname "$0")/../.."
NOTIFYD=${NOTIFYD:-.build/release/notifyd}
TOPICS=${TOPICS:-100000}
REPS=${REPS:-3}
MESSAGES=${MESSAGES:-1}
for _ in $(seq "$REPS"); do
    dir=$(mktemp -d)
    "$NOTIFYD" --socket "$dir/s" --state-dir "$dir/state" --config /dev/null "$@" 2>"$dir/log" &
    pid=$!
    for _ in $(seq 200); do [ -S "$dir/s" ] && break; sleep 0.05; done
    before=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    python3 - "$dir/s" "$TOPICS" "$MESSAGES" <<'PY'
import socket, sys
path, count, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
connection = socket.socket(socket.AF_UNIX)
connection.connect(path)
for round in range(rounds):
    # A round at a time, each message to another topic, and the next round once the daemon took this one in.
    connection.sendall(b"".join(b"PUB mem.t%d 16\n%s\n" % (i, b"x" * 16) for i in range(count)) + b"#%d PING\n" % (round + 1))
    received = b""
    while b"#%d PONG" % (round + 1) not in received:
        received += connection.recv(65536)
PY
    after=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    line="RSS $before KiB idle, $after KiB with $TOPICS topics: $(( (after - before) * 1024 / TOPICS )) B per topic"
    if [ "$MESSAGES" -gt 1 ]; then
        line="$line, $MESSAGES messages published to each: $(( (after - before) * 1024 / (TOPICS * MESSAGES) )) B per message"
    fi
    echo "$line"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
done
