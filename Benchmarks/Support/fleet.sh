# fleet.sh - what the fleet benchmarks (Federation/fleet.sh, ImportCost/run.sh) share; source it after setting REPO,
# RUN (a scratch directory, emptied) and NAME (the script's name, for messages).
#
#   NOTIFYD, NOTIFY, NOTIFYD_FLEET   the packaged binaries (packaging/build-deb.sh) unless set; checked
#   PIDS, cleanup on exit            processes started are added to PIDS and killed when the script ends
#   wait_for SECONDS COMMAND...      runs COMMAND until it succeeds; fails, naming it, after SECONDS
#   cpu PID                          the clock ticks (user + system) PID has run; TICKS the ticks per second
#   start_nats                       a nats-server with JetStream on a port of its own, in $RUN: sets NATS, PORT

stage=$REPO/.build/deb/notifyd_$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' "$REPO/Sources/NotifyProtocol/Host/NotifydRelease.swift")_$(dpkg --print-architecture 2>/dev/null || echo amd64)
NOTIFYD=${NOTIFYD:-$stage/usr/sbin/notifyd}
NOTIFY=${NOTIFY:-$stage/usr/bin/notify}
NOTIFYD_FLEET=${NOTIFYD_FLEET:-$stage/usr/sbin/notifyd-fleet}
for bin in "$NOTIFYD" "$NOTIFY" "$NOTIFYD_FLEET"; do
	[ -x "$bin" ] || { echo "$NAME: $bin not found; packaging/build-deb.sh first (or set NOTIFYD, NOTIFY, NOTIFYD_FLEET)" >&2; exit 1; }
done
command -v nats-server >/dev/null || { echo "$NAME: nats-server missing: script/bootstrap --for-tests" >&2; exit 1; }
case $RUN in /|"$REPO"*) echo "$NAME: refusing RUN=$RUN" >&2; exit 1 ;; esac
rm -rf "$RUN" && mkdir -p "$RUN"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_for() {
	local deadline=$((SECONDS + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { echo "$NAME: timed out waiting for: $*" >&2; exit 1; }
		sleep 0.05
	done
}
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TICKS=$(getconf CLK_TCK)
start_nats() {
	nats-server -a 127.0.0.1 -p -1 -js -sd "$RUN/jetstream" >"$RUN/nats.log" 2>&1 &
	NATS=$!
	PIDS+=("$NATS")
	wait_for 10 grep -q 'Server is ready' "$RUN/nats.log"
	PORT=$(grep -o 'client connections on 127.0.0.1:[0-9]*' "$RUN/nats.log" | head -n 1 | sed 's/.*://')
}
