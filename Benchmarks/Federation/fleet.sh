#!/usr/bin/env bash
# fleet.sh - a fleet on one nats-server (issue 47): HOSTS hosts (a daemon and its fleet service each, their defaults:
# catch-up on), one publisher sending COUNT lines with `notify send --lines` on the first, a `notify subscribe` on each
# of the others. Reports, beside plain NATS 1 -> HOSTS-1 on the same server in the same run: the deliveries per second
# over all subscribers, how many arrived within DEADLINE seconds, the nats-server's CPU per message published, and the
# JetStream consumers the server keeps, on every stream of the account (none: where each host stands is its own).
#
#   packaging/build-deb.sh && Benchmarks/Federation/fleet.sh            # 12 hosts, 100,000 lines
#   HOSTS=4 COUNT=20000 Benchmarks/Federation/fleet.sh
#
# Environment: NOTIFYD, NOTIFY, NOTIFYD_FLEET (default: the packaged binaries), HOSTS, COUNT, DEADLINE,
# RUN (scratch directory). Plain NATS is measured by the C harness of Benchmarks/Anchors/harness, built in $RUN.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
HOSTS=${HOSTS:-12}
COUNT=${COUNT:-100000}
DEADLINE=${DEADLINE:-120}
RUN=${RUN:-/tmp/notifyd-fleet-bench}
NAME=Federation/fleet.sh
# shellcheck source=../Support/fleet.sh
source "$REPO/Benchmarks/Support/fleet.sh"

make -s -C "$REPO/Benchmarks/Anchors/harness" OUT="$RUN/harness" >/dev/null
start_nats

# Plain NATS first, 1 -> HOSTS-1, on the same server: COUNT 16-byte messages.
subscribers=$((HOSTS - 1))
before=$(cpu "$NATS")
plain=$("$RUN/harness/bench" throughput -P nats -a "tcp:127.0.0.1:$PORT" -n "$COUNT" -s 16 -c "$subscribers" -w 262144 -p "$NATS" 2>/dev/null | grep RESULT || true)
plain_cpu=$(($(cpu "$NATS") - before))
plain_rate=$(sed -n 's/.* deliv_rate=\([^ ]*\).*/\1/p' <<<"$plain")

for index in $(seq 1 "$HOSTS"); do
	name=host$index
	"$NOTIFYD" --socket "$RUN/$name.sock" --state-dir "$RUN/$name.state" --config /dev/null --fleet-user "$(id -u)" >"$RUN/$name.log" 2>&1 &
	PIDS+=("$!")
	"$NOTIFYD_FLEET" --socket "$RUN/$name.sock" --config /dev/null --nats "nats://127.0.0.1:$PORT" --host-name "$name" \
		>"$RUN/$name.fleet.log" 2>&1 &
	PIDS+=("$!")
done
for index in $(seq 1 "$HOSTS"); do wait_for 60 grep -q 'read the latest messages' "$RUN/host$index.fleet.log"; done
for index in $(seq 2 "$HOSTS"); do
	"$NOTIFY" --socket "$RUN/host$index.sock" subscribe 'fleet.>' --count "$COUNT" --format raw >"$RUN/host$index.out" 2>"$RUN/host$index.err" &
	PIDS+=("$!")
done
sleep 1  # the subscriptions are made (a notify subscribe that has not subscribed yet would miss the first lines)
before=$(cpu "$NATS")
start=$(date +%s.%N)
seq 1 "$COUNT" | "$NOTIFY" --socket "$RUN/host1.sock" send fleet.m --lines --no-retain
deadline=$((SECONDS + DEADLINE))
until [ "$(cat "$RUN"/host*.out 2>/dev/null | wc -l)" -ge $((COUNT * subscribers)) ] || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
elapsed=$(python3 -c "import time; print(time.time() - $start)")
fleet_cpu=$(($(cpu "$NATS") - before))
delivered=$(cat "$RUN"/host*.out | wc -l)
# What the publishing host could not export (its outbox full: local publish never waits for NATS).
not_exported=$("$NOTIFY" --socket "$RUN/host1.sock" stats | awk '$1 == "nats_outbox_dropped" { print $2 }')
# The replays of the latest messages use ephemeral consumers that end 5 s after they are done: counted after that.
sleep 6
consumers=$(python3 - "$PORT" <<'PY'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.recv(4096)
s.sendall(b'CONNECT {"verbose":false}\r\nSUB _INBOX.fleet 1\r\nPUB $JS.API.INFO _INBOX.fleet 0\r\n\r\n')
buffer = b""
while b"\r\n" not in buffer.split(b"MSG ", 1)[-1] or b"consumers" not in buffer:
    chunk = s.recv(65536)
    if not chunk: break
    buffer += chunk
body = buffer[buffer.index(b"{"):]
body = body[: body.rindex(b"}") + 1]
print(json.loads(body)["consumers"])
PY
)
python3 - <<PY
count, subs, delivered, elapsed = $COUNT, $subscribers, $delivered, $elapsed
plain_rate = float("${plain_rate:-nan}" or "nan")
rate = delivered / elapsed
ticks = $TICKS
print(f"fleet of $HOSTS hosts on one nats-server, {count:,} lines published on host1, a subscriber on each of the {subs} others")
print(f"| case | deliveries/s | vs plain NATS | delivered | nats-server CPU per message published |")
print(f"| --- | ---: | ---: | ---: | ---: |")
print(f"| plain NATS 1 -> {subs} | {plain_rate:,.0f} | 1.00 | - | {$plain_cpu / ticks * 1e6 / count:.1f} µs |")
print(f"| the fleet | {rate:,.0f} | {rate / plain_rate:.4f} | {delivered:,} of {count * subs:,} in {elapsed:.1f} s | {$fleet_cpu / ticks * 1e6 / count:.1f} µs |")
print(f"not exported by host1 (its outbox full): ${not_exported:-0}")
print(f"JetStream consumers the server keeps: $consumers (for $HOSTS hosts)")
PY
