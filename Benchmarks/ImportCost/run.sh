#!/usr/bin/env bash
# run.sh - what one message from another host costs this host: the CPU time the fleet service (notifyd-fleet) and the
# daemon spend per imported message, read from /proc (user + system) around COUNT messages that a plain NATS client
# publishes under the fleet's subjects with notifyd's provenance headers, live (--nats-catch-up 0: the import path
# alone, without the stream). Issue 47, item 5: at most 1 µs per message, both processes together.
#
#   Benchmarks/ImportCost/run.sh                  # the packaged binaries (packaging/build-deb.sh), REPS=3
#   COUNT=500000 REPS=5 Benchmarks/ImportCost/run.sh
#
# Environment: NOTIFYD, NOTIFY, NOTIFYD_FLEET (default: the packaged ones), COUNT, REPS, RUN (scratch directory).
# Prints one line per repetition and the medians.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
COUNT=${COUNT:-300000}
REPS=${REPS:-3}
RUN=${RUN:-/tmp/notifyd-import-cost}
NAME=ImportCost/run.sh
# shellcheck source=../Support/fleet.sh
source "$REPO/Benchmarks/Support/fleet.sh"
stat_of() { "$NOTIFY" --socket "$RUN/beta.sock" stats | awk -v name="$1" '$1 == name { print $2 }'; }

start_nats
"$NOTIFYD" --socket "$RUN/beta.sock" --state-dir "$RUN/state" --config /dev/null --fleet-user "$(id -u)" --history-messages 0 \
	>"$RUN/beta.log" 2>&1 &
DAEMON=$!
PIDS+=("$DAEMON")
"$NOTIFYD_FLEET" --socket "$RUN/beta.sock" --config /dev/null --nats "nats://127.0.0.1:$PORT" --host-name beta --nats-catch-up 0 \
	>"$RUN/fleet.log" 2>&1 &
FLEET=$!
PIDS+=("$FLEET")
wait_for 20 grep -q 'read the latest messages' "$RUN/fleet.log"

for rep in $(seq 1 "$REPS"); do
	before=$(stat_of nats_imported)
	daemon_cpu=$(cpu "$DAEMON")
	fleet_cpu=$(cpu "$FLEET")
	python3 - "$PORT" "$COUNT" "$rep" <<'PY'
import socket, sys
port, count, rep = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
s.recv(4096)  # INFO
s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
# Another host's messages as its fleet service writes them: provenance headers, a 16-byte payload, 100 topics.
chunk = []
for i in range(count):
    headers = ("NATS/1.0\r\nNotifyd-Host: alpha\r\nNotifyd-Uid: 1000\r\nNotifyd-Pid: 4242\r\nNotifyd-Unit: backup.service\r\n"
               f"Notifyd-Seq: {rep * 10_000_000 + i + 1}\r\nNotifyd-Time: 1795305600000000\r\nNotifyd-Retain: 0\r\n\r\n")
    payload = "0123456789abcdef"
    chunk.append(f"HPUB notifyd.cost.t{i % 100} {len(headers)} {len(headers) + 16}\r\n{headers}{payload}\r\n")
    if len(chunk) == 5000:
        s.sendall("".join(chunk).encode()); chunk = []
if chunk: s.sendall("".join(chunk).encode())
s.sendall(b"PING\r\n")
buffer = b""
while b"PONG" not in buffer:
    buffer += s.recv(4096)
PY
	wait_for 120 sh -c "[ \"\$('$NOTIFY' --socket '$RUN/beta.sock' stats | awk '\$1 == \"nats_imported\" { print \$2 }')\" -ge $((before + COUNT)) ]"
	daemon_us=$(python3 -c "print(f'{($(cpu "$DAEMON") - $daemon_cpu) / $TICKS * 1e6 / $COUNT:.2f}')")
	fleet_us=$(python3 -c "print(f'{($(cpu "$FLEET") - $fleet_cpu) / $TICKS * 1e6 / $COUNT:.2f}')")
	echo "repetition $rep: $COUNT imports; CPU per message: notifyd-fleet $fleet_us µs, notifyd $daemon_us µs" | tee -a "$RUN/results.txt"
done
python3 - "$RUN/results.txt" <<'PY'
import re, statistics, sys
rows = [tuple(map(float, re.findall(r"([0-9.]+) µs", line))) for line in open(sys.argv[1])]
fleet, daemon = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
print(f"median of {len(rows)}: notifyd-fleet {fleet:.2f} µs, notifyd {daemon:.2f} µs, together {fleet + daemon:.2f} µs per imported message")
PY
