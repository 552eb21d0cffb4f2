#!/usr/bin/env bash
# anchors.sh - measure notifyd next to Redis, Mosquitto and NATS, each driven
# through its own protocol by the same harness, and print the tables.
#
#   NOTIFYD=PATH NOTIFY=PATH ./anchors.sh          full run (REPS=3, about 15 minutes)
#   REPS=1 QUICK=1 NOTIFYD=... NOTIFY=... ./anchors.sh   smoke test
#   PHASES="latency" REPS=5 ...                   some phases only
#
# Benchmarks/Anchors/run.sh is the usual way in: it picks notifyd's binaries
# and the directories.  As root: installs what is missing (apt), builds bench
# and clirun in $WORK, starts the servers in the background (servers.sh), runs
# the phases (phases.sh), stops the servers it started by PID, and prints the
# tables (summarize.py).
#
# Environment:
#   NOTIFYD, NOTIFY   notifyd's daemon and CLI (required)
#   NOTIFYD_ARGS      more daemon options, split into words
#   RUN               sockets, configs, logs, raw results (default /tmp/anchors)
#   WORK              where bench and clirun are built (default $RUN/build)
#   REPS              repetitions of each phase (3); every cell is their median
#   QUICK=1           smaller counts: a smoke test
#   PHASES            "memory throughput latency cli", or some of them
#   LIMIT             seconds one measurement may take (120)
#   CLI_RUNS          spawns per command in the CLI phase (1000)
#   LAT_MSGS          messages per latency measurement (20000)
#   RESULTS           the raw RESULT lines (default $RUN/results.txt)
#   COMMAND_LINE      the command recorded with the results (default: this one)
# Written to $RUN: results.txt, results.md (the tables), versions.txt,
# stderr.log (the harness's complaints), and each server's log.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)

# Before the defaults below: what was asked for, to record with the results.
COMMAND_LINE=${COMMAND_LINE:-$(
	for v in WORK RUN NOTIFYD NOTIFY NOTIFYD_ARGS REPS QUICK PHASES LIMIT CLI_RUNS LAT_MSGS RESULTS; do
		[ -z "${!v+set}" ] || printf '%s=%q ' "$v" "${!v}"
	done
	printf '%q' "$0"
	[ $# -eq 0 ] || printf ' %q' "$@"
)}

RUN=${RUN:-/tmp/anchors}
WORK=${WORK:-$RUN/build}
NOTIFYD=${NOTIFYD:-}
NOTIFY=${NOTIFY:-}
NOTIFYD_ARGS=${NOTIFYD_ARGS:-}
REPS=${REPS:-3}
QUICK=${QUICK:-0}
PHASES=${PHASES:-"memory throughput latency cli"}
RESULTS=${RESULTS:-$RUN/results.txt}
LIMIT=${LIMIT:-120}
CLI_RUNS=${CLI_RUNS:-1000}
LAT_MSGS=${LAT_MSGS:-20000}
PROTOS="redis mqtt nats notifyd"

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

# shellcheck source=servers.sh
. "$HERE/servers.sh"
# shellcheck source=phases.sh
. "$HERE/phases.sh"

install_packages() {
	local cmd pkg missing=()
	while read -r cmd pkg; do
		command -v "$cmd" >/dev/null || missing+=("$pkg")
	done <<-EOF
		mosquitto mosquitto
		mosquitto_pub mosquitto-clients
		redis-server redis-server
		redis-cli redis-tools
		nats-server nats-server
		socat socat
		hyperfine hyperfine
		/usr/bin/time time
		taskset util-linux
		python3 python3
		cc gcc
		make make
	EOF
	if ((${#missing[@]})); then
		log "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
}

versions() {
	echo "redis-server: $(redis-server --version)"
	echo "mosquitto: $(mosquitto -h 2>&1 | head -1)"
	echo "nats-server: $(nats-server --version)"
	echo "notifyd: $("$NOTIFYD" --version) ($NOTIFYD)"
	echo "mosquitto-clients: $(dpkg-query -W -f='${Version}' mosquitto-clients)"
	echo "redis-tools: $(dpkg-query -W -f='${Version}' redis-tools)"
	echo "socat: $(socat -V | sed -n 2p)"
	echo "hyperfine: $(hyperfine --version)"
	echo "kernel: $(uname -r), cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo)"
}

# The commit of the tree the harness is in, "-dirty" if it has changes
# (untracked files too: a new source file changes a build as much).  Run
# as root in someone else's clone, git would refuse the repository without
# safe.directory; this only reads.
notifyd_commit() {
	local git=(git -c safe.directory='*' -C "$HERE") commit
	commit=$("${git[@]}" rev-parse --short HEAD 2>/dev/null) || { echo unknown; return; }
	[ -z "$("${git[@]}" status --porcelain 2>/dev/null)" ] || commit+=-dirty
	echo "$commit"
}

# The run's header, as "# key: value" lines at the top of the raw results;
# summarize.py puts them above the tables, so every table says when, what
# and how.
describe_run() {
	echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "# notifyd commit: $(notifyd_commit)"
	echo "# notifyd binary: $("$NOTIFYD" --version 2>&1 | head -1) ($NOTIFYD)"
	echo "# command: $COMMAND_LINE"
}

main() {
	local ph bin
	for bin in "$NOTIFYD" "$NOTIFY"; do
		if [ -z "$bin" ] || [ ! -x "$bin" ]; then
			echo "anchors.sh: NOTIFYD and NOTIFY must name notifyd's binaries" \
				"(NOTIFYD='$NOTIFYD' NOTIFY='$NOTIFY')" >&2
			exit 1
		fi
	done
	install_packages
	mkdir -p "$RUN" "$WORK"
	WORK=$(cd "$WORK" && pwd)
	# Mosquitto runs as user "mosquitto" once started and creates its
	# socket here.
	chown mosquitto "$RUN" 2>/dev/null || chmod 1777 "$RUN"
	: >"$RESULTS"
	: >"$RUN/stderr.log"
	ulimit -n 20000 2>/dev/null || ulimit -n 4096   # 1000 idle connections
	make -s -C "$HERE" OUT="$WORK"
	BENCH=$WORK/bench
	CLIRUN=$WORK/clirun

	describe_run | tee -a "$RESULTS" | sed 's/^# //' >&2
	versions | tee "$RUN/versions.txt" >&2
	for ph in $PHASES; do
		# The memory phase starts a fresh server per measurement; the
		# others share one set of servers.
		[ "$ph" = memory ] || [ -n "${PID[redis]:-}" ] || start_all
		log "phase $ph"
		"phase_$ph"
	done
	stop_all
	log "raw results: $RESULTS"
	python3 "$HERE/summarize.py" "$RESULTS" | tee "$RUN/results.md"
}

trap stop_all EXIT
trap on_signal INT TERM
main "$@"
