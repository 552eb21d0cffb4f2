# daemon.sh - helpers the memory benchmarks share; source it after setting NOTIFYD and NOTIFY.
#
#   start_daemon DIR [ARG...]  starts NOTIFYD on DIR/s (state in DIR/state, no configuration file, its output in
#                             DIR/log, ARGs after), sets pid, and waits (at most 5 s) for its socket
#   field NAME PID            a field of /proc/PID/status, in KiB (VmRSS, VmHWM, RssAnon)
#   counter SOCKET NAME       a counter of the daemon's `notify stats`
#   wait_for SOCKET NAME V    waits (at most 60 s) until that counter is V; fails, saying where it stands, if not

start_daemon() {
	local dir=$1
	shift
	"$NOTIFYD" --socket "$dir/s" --state-dir "$dir/state" --config /dev/null "$@" >"$dir/log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do [ -S "$dir/s" ] && return 0; sleep 0.05; done
	echo "$(basename "$0"): notifyd did not start:" >&2
	tail -5 "$dir/log" >&2
	return 1
}
field() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$2/status"; }
counter() { "$NOTIFY" --socket "$1" stats | awk -v key="$2" '$1 == key { print $2 }'; }
wait_for() {
	for _ in $(seq 1 600); do [ "$(counter "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done
	echo "$(basename "$0"): $2 never reached $3 (at $(counter "$1" "$2"))" >&2
	return 1
}
