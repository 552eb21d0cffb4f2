# daemon.sh - helpers the memory benchmarks share; source it after setting NOTIFY.
#
#   field NAME PID            a field of /proc/PID/status, in KiB (VmRSS, VmHWM, RssAnon)
#   counter SOCKET NAME       a counter of the daemon's `notify stats`
#   wait_for SOCKET NAME V    waits (at most 60 s) until that counter is V; fails, saying where it stands, if not

field() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$2/status"; }
counter() { "$NOTIFY" --socket "$1" stats | awk -v key="$2" '$1 == key { print $2 }'; }
wait_for() {
	for _ in $(seq 1 600); do [ "$(counter "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done
	echo "$(basename "$0"): $2 never reached $3 (at $(counter "$1" "$2"))" >&2
	return 1
}
