# servers.sh - starting and stopping the four servers; sourced by anchors.sh.
#
# Every server listens only on this machine: Redis, Mosquitto and notifyd on
# Unix sockets under $RUN, NATS on 127.0.0.1 at a port it picks itself (it
# has no Unix socket listener).  start_X sets PID[X] and ADDR[X] (the
# address as bench takes it) and returns once the server answers.  Only the
# servers started here are stopped, by PID.

declare -A PID ADDR

wait_until() { # wait_until SECONDS CMD...: poll until CMD succeeds
	local end=$((SECONDS + $1))
	shift
	until "$@" 2>/dev/null; do
		((SECONDS < end)) || { log "timed out waiting for: $*"; return 1; }
		sleep 0.05
	done
}

start_redis() {
	# No persistence, no TCP: a pub/sub broker, as the others are.
	cat >"$RUN/redis.conf" <<-EOF
		port 0
		bind 127.0.0.1
		unixsocket $RUN/redis.sock
		unixsocketperm 700
		daemonize no
		save ""
		appendonly no
		dir $RUN
		logfile $RUN/redis.log
	EOF
	rm -f "$RUN/redis.sock"
	redis-server "$RUN/redis.conf" &
	PID[redis]=$!
	ADDR[redis]=unix:$RUN/redis.sock
	wait_until 10 redis-cli -s "$RUN/redis.sock" ping >/dev/null
}

start_mqtt() {
	# Mosquitto drops root privileges to its own user, which must be able
	# to create the socket in $RUN (main() sees to that).  Connection
	# messages are off: the others log no line per connection either.
	cat >"$RUN/mosquitto.conf" <<-EOF
		listener 0 $RUN/mosq.sock
		allow_anonymous true
		persistence false
		connection_messages false
		log_dest stdout
	EOF
	rm -f "$RUN/mosq.sock"
	mosquitto -c "$RUN/mosquitto.conf" >>"$RUN/mosquitto.log" 2>&1 &
	PID[mqtt]=$!
	ADDR[mqtt]=unix:$RUN/mosq.sock
	wait_until 10 test -S "$RUN/mosq.sock"
}

start_nats() {
	# -p -1: a free port, read back from the log.
	: >"$RUN/nats.log"
	nats-server -a 127.0.0.1 -p -1 >"$RUN/nats.log" 2>&1 &
	PID[nats]=$!
	wait_until 10 grep -q 'Server is ready' "$RUN/nats.log"
	ADDR[nats]=tcp:$(grep -o 'client connections on 127.0.0.1:[0-9]*' "$RUN/nats.log" |
		head -1 | sed 's/.* on //')
}

start_notifyd() {
	# A fresh state directory each time: notifyd keeps retained messages
	# across restarts, which would inflate the next memory figure.
	rm -rf "$RUN/notifyd-state" "$RUN/notifyd.sock"
	# shellcheck disable=SC2086  # NOTIFYD_ARGS is split into words on purpose
	"$NOTIFYD" --socket "$RUN/notifyd.sock" --state-dir "$RUN/notifyd-state" $NOTIFYD_ARGS \
		>>"$RUN/notifyd.log" 2>&1 &
	PID[notifyd]=$!
	ADDR[notifyd]=unix:$RUN/notifyd.sock
	wait_until 10 test -S "$RUN/notifyd.sock"
}

start_all() {
	local p
	for p in $PROTOS; do "start_$p"; done
	log "servers: redis ${PID[redis]} mosquitto ${PID[mqtt]}" \
		"nats ${PID[nats]} (${ADDR[nats]}) notifyd ${PID[notifyd]}"
}

stop_server() {
	local name=$1 pid=${PID[$1]:-}
	[ -n "$pid" ] || return 0
	if kill -TERM "$pid" 2>/dev/null; then
		for _ in $(seq 100); do    # 5 s to exit, then KILL
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	unset "PID[$name]"
}

stop_all() {
	local p
	for p in $PROTOS; do stop_server "$p"; done
}

set_affinity() { # set_affinity CPUS: every thread of every server
	local p
	for p in $PROTOS; do taskset -a -p -c "$1" "${PID[$p]}" >/dev/null; done
}
