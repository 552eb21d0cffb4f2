#!/usr/bin/env bash
# run.sh - measure notifyd next to Redis, Mosquitto and NATS with the neutral
# C harness in /work/shared/anchors, without modifying it.
#
#   Benchmarks/Anchors/run.sh                  full run (REPS=3)
#   REPS=1 QUICK=1 Benchmarks/Anchors/run.sh   smoke test
#   PHASES="latency" REPS=5 Benchmarks/Anchors/run.sh
#
# The harness is copied to $WORK, proto_notifyd.c is added, and the copy is
# patched so that notifyd is a fourth protocol (proto.h, bench.c, Makefile,
# run-anchors.sh, summarize.py).  Every patch anchor must match exactly once,
# or the script stops.  Then the patched run-anchors.sh runs as usual (as root:
# it apt-installs the other servers) and prints the tables.
#
# Environment:
#   ANCHORS   harness to copy              (default /work/shared/anchors)
#   WORK      scratch copy, replaced        (default /tmp/notifyd-anchors/harness)
#   RUN       sockets, logs, raw results   (default /tmp/notifyd-anchors/run)
#   NOTIFYD   daemon binary                (default <repo>/.build/release/notifyd)
#   NOTIFY    CLI binary                   (default <repo>/.build/release/notify)
#   NOTIFYD_ARGS  extra daemon options, e.g. "--max-queued-messages 300000"
#   REPS, QUICK, PHASES, LIMIT, CLI_RUNS, LAT_MSGS: passed to run-anchors.sh
# Build the binaries first:
#   swift build -c release --product notifyd && swift build -c release --product notify
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
ANCHORS=${ANCHORS:-/work/shared/anchors}
WORK=${WORK:-/tmp/notifyd-anchors/harness}
export RUN=${RUN:-/tmp/notifyd-anchors/run}
export NOTIFYD=${NOTIFYD:-$REPO/.build/release/notifyd}
export NOTIFY=${NOTIFY:-$REPO/.build/release/notify}
export NOTIFYD_ARGS=${NOTIFYD_ARGS:-}

for bin in "$NOTIFYD" "$NOTIFY"; do
	[ -x "$bin" ] || {
		echo "run.sh: $bin not found; build it: (cd $REPO && swift build -c release" \
			"--product notifyd && swift build -c release --product notify)" >&2
		exit 1
	}
done
[ -f "$ANCHORS/run-anchors.sh" ] || { echo "run.sh: no harness in $ANCHORS" >&2; exit 1; }

case $WORK in /|"$ANCHORS"|"$REPO"*) echo "run.sh: refusing WORK=$WORK" >&2; exit 1 ;; esac
rm -rf "$WORK"
mkdir -p "$(dirname "$WORK")"
cp -R "$ANCHORS" "$WORK"
chmod -R u+w "$WORK"
rm -f "$WORK"/bench "$WORK"/clirun "$WORK"/*.o
cp "$HERE/harness/proto_notifyd.c" "$WORK/"

python3 - "$WORK" <<'PY'
import pathlib, sys

work = pathlib.Path(sys.argv[1])


def patch(name, old, new):
    path = work / name
    text = path.read_text()
    n = text.count(old)
    if n != 1:
        sys.exit(f"run.sh: patch anchor found {n} times in {name} (want 1): {old!r}")
    path.write_text(text.replace(old, new))


patch("proto.h", "extern const struct proto proto_nats;\n",
      "extern const struct proto proto_nats;\nextern const struct proto proto_notifyd;\n")
patch("bench.c", "\t&proto_nats,\n};", "\t&proto_nats,\n\t&proto_notifyd,\n};")
patch("Makefile", " proto_nats.o\n", " proto_nats.o proto_notifyd.o\n")

R = "run-anchors.sh"
patch(R, 'PROTOS="redis mqtt nats"\n', 'PROTOS="redis mqtt nats notifyd"\n')
patch(R, '\techo "nats-server: $(nats-server --version)"\n',
      '\techo "nats-server: $(nats-server --version)"\n'
      '\techo "notifyd: $("$NOTIFYD" --version) ($NOTIFYD)"\n')
patch(R, "\nstop_server() {\n", r'''
start_notifyd() {
	# A fresh state directory every time: notifyd keeps retained messages
	# across restarts, which would inflate the next memory measurement.
	rm -rf "$RUN/notifyd-state" "$RUN/notifyd.sock"
	# shellcheck disable=SC2086  # NOTIFYD_ARGS is split into words on purpose
	"$NOTIFYD" --socket "$RUN/notifyd.sock" --state-dir "$RUN/notifyd-state" $NOTIFYD_ARGS \
		>>"$RUN/notifyd.log" 2>&1 &
	PID[notifyd]=$!
	ADDR[notifyd]=unix:$RUN/notifyd.sock
	wait_until 10 test -S "$RUN/notifyd.sock"
}

stop_server() {
''')
patch(R, "\t\t\tstart_nats\n", "\t\t\tstart_nats\n\t\t\tstart_notifyd\n")
patch(R, 'nats ${PID[nats]} (${ADDR[nats]})"',
      'nats ${PID[nats]} (${ADDR[nats]}) notifyd ${PID[notifyd]}"')
patch(R, '>"$RUN/pub.nats"\n',
      '>"$RUN/pub.nats"\n'
      "\tprintf 'PUB t 5\\nhello\\nPING\\n' >\"$RUN/pub.notifyd\"\n")
patch(R, "\t\t\tbench-pub1-nats|nats|-|$BENCH pub1 -P nats -a ${ADDR[nats]} -t t -m hello\n",
      "\t\t\tbench-pub1-nats|nats|-|$BENCH pub1 -P nats -a ${ADDR[nats]} -t t -m hello\n"
      "\t\t\tnotify_send|notifyd|-|$NOTIFY send --socket $RUN/notifyd.sock t hello\n"
      "\t\t\tsocat-notifyd|notifyd|$RUN/pub.notifyd|socat - UNIX-CONNECT:$RUN/notifyd.sock\n"
      "\t\t\tbench-pub1-notifyd|notifyd|-|$BENCH pub1 -P notifyd -a ${ADDR[notifyd]} -t t -m hello\n")

patch("summarize.py", '"floor": "echo process (floor)"}',
      '"floor": "echo process (floor)",\n          "notifyd": "notifyd"}')
patch("summarize.py", 'ORDER = ["floor", "redis", "mqtt", "nats"]',
      'ORDER = ["floor", "redis", "mqtt", "nats", "notifyd"]')
PY

echo "run.sh: patched harness in $WORK, results in $RUN" >&2
exec bash "$WORK/run-anchors.sh" "$@"
