#!/usr/bin/env bash
# run.sh - measure notifyd next to Redis, Mosquitto and NATS with the C
# harness in harness/ (gcc and make; the peers are apt-installed), from a
# clone alone.
#
#   Benchmarks/Anchors/run.sh                  full run (REPS=3, about 15 minutes)
#   REPS=1 QUICK=1 Benchmarks/Anchors/run.sh   smoke test
#   PHASES="latency" REPS=5 Benchmarks/Anchors/run.sh
#
# As root: harness/anchors.sh installs what is missing, builds bench and
# clirun in $WORK (never in the tree), starts the four servers, runs the
# phases, stops the servers it started, and prints the tables.  Every run
# prints, and writes at the top of $RUN/results.md, its date, the commit of
# this tree ("-dirty" if it has changes) and this command line.
#
# Environment:
#   WORK      where the harness is built, replaced (default /tmp/notifyd-anchors/harness)
#   RUN       sockets, logs, raw results   (default /tmp/notifyd-anchors/run)
#   NOTIFYD   daemon binary                (default <repo>/.build/release/notifyd)
#   NOTIFY    CLI binary                   (default <repo>/.build/release/notify)
#   NOTIFYD_ARGS  extra daemon options, e.g. "--max-queued-messages 300000"
#   REPS, QUICK, PHASES, LIMIT, CLI_RUNS, LAT_MSGS: passed to harness/anchors.sh
# Build the binaries first:
#   swift build -c release --product notifyd && swift build -c release --product notify
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

# As typed, with the settings given: recorded with the results.
COMMAND_LINE=$(
	for v in WORK RUN NOTIFYD NOTIFY NOTIFYD_ARGS REPS QUICK PHASES LIMIT CLI_RUNS LAT_MSGS RESULTS; do
		[ -z "${!v+set}" ] || printf '%s=%q ' "$v" "${!v}"
	done
	printf '%q' "$0"
	[ $# -eq 0 ] || printf ' %q' "$@"
)
export COMMAND_LINE
export WORK=${WORK:-/tmp/notifyd-anchors/harness}
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

# A fresh build every run, so that no object of other sources or flags is
# measured; and never in the tree.
case $WORK in /|"$REPO"|"$REPO"/*) echo "run.sh: refusing WORK=$WORK" >&2; exit 1 ;; esac
rm -rf "$WORK"

exec bash "$HERE/harness/anchors.sh" "$@"
