#!/usr/bin/env bash
# RSS per idle subscribed connection: a release notifyd, CONNECTIONS connections that each subscribe to a topic of
# their own (as the anchors harness's idle mode does) and then wait; RSS from /proc before and after, anonymous and
# file-backed pages apart. Prints one line per run. Extra arguments go to notifyd.
#   swift build -c release --product notifyd && Benchmarks/IdleConnections/run.sh [notifyd options]
# NOTIFYD names another binary (a packaged /usr/sbin/notifyd, say); CONNECTIONS and REPS change the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
NOTIFYD=${NOTIFYD:-.build/release/notifyd}
CONNECTIONS=${CONNECTIONS:-1000}
REPS=${REPS:-3}
ulimit -n $((CONNECTIONS + 256)) 2>/dev/null || true
for _ in $(seq "$REPS"); do
    dir=$(mktemp -d)
    "$NOTIFYD" --socket "$dir/s" --state-dir "$dir/state" --config /dev/null "$@" 2>"$dir/log" &
    pid=$!
    for _ in $(seq 200); do [ -S "$dir/s" ] && break; sleep 0.05; done
    python3 - "$dir/s" "$CONNECTIONS" "$pid" <<'PY'
import socket, sys, time
path, count, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rss():
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0])
    return fields
def connect(i):
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    connection.sendall(b"SUB idle.t%d\n#1 PING\n" % i)
    received = b""
    while b"#1 PONG" not in received:
        received += connection.recv(65536)
    return connection
# One connection first, so that what the first one makes once (tables, pools) is not counted per connection.
first = connect(-1)
time.sleep(1)
before = rss()
connections = [connect(i) for i in range(count)]
time.sleep(1)
after = rss()
per = lambda key: (after[key] - before[key]) * 1024 / count
print(f"RSS {before['VmRSS']} KiB idle, {after['VmRSS']} KiB with {count} connections: "
      f"{per('VmRSS'):.0f} B per connection (anon {per('RssAnon'):.0f}, file {per('RssFile'):.0f}); "
      f"idle anon {before['RssAnon']} KiB, file {before['RssFile']} KiB")
PY
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
done
