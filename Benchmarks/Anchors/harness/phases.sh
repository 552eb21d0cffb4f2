# phases.sh - the measurements: memory, throughput, latency, cli; sourced
# by anchors.sh.  Each phase runs REPS times; every measurement is bounded
# in count and in time (bench -T, and `timeout` around each process).

# payload, subscribers, messages.  The fan-out cases send fewer messages so
# that the slowest server (Mosquitto) is done in 10-20 s.  QUICK=1 sends a
# twentieth.
TP_CASES="16 1 1000000
16 16 200000
16 100 50000
1024 1 1000000
1024 16 100000
1024 100 20000"

# Background measurements, stopped by PID if the run is interrupted.
BG=()
LISTENERS=()
on_signal() {
	local pid
	for pid in "${BG[@]}" "${LISTENERS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	exit 130
}

# record REP CMD...: run one measurement and append its RESULT lines to
# $RESULTS, tagged "rep=REP" and $TAG, echoing them as progress.  REP 0 is
# a warm-up: run, not kept.  The command runs in the background and is
# waited for, so that a signal interrupts the wait at once.
record() {
	local rep=$1 rc=0
	shift
	timeout $((LIMIT + 30)) "$@" >"$RUN/record.out" 2>>"$RUN/stderr.log" &
	BG=($!)
	wait "${BG[0]}" || rc=$?
	BG=()
	[ "$rep" = 0 ] && return 0
	((rc == 0)) || log "exit $rc: $*"
	grep '^RESULT' "$RUN/record.out" | sed "s/^RESULT /RESULT rep=$rep ${TAG:-}/" |
		tee -a "$RESULTS" | sed 's/^RESULT //' >&2 || true
}

# Memory: a fresh server for every measurement, so that earlier load does
# not count.  Core NATS stores nothing, so it has no fill figure.
phase_memory() {
	local rep p
	for rep in $(seq "$REPS"); do
		for p in $PROTOS; do
			"start_$p"
			sleep 1
			record "$rep" "$BENCH" idle -P "$p" -a "${ADDR[$p]}" -c 1000 \
				-p "${PID[$p]}" -H 1 -t idle
			stop_server "$p"
			[ "$p" = nats ] && continue
			"start_$p"
			sleep 1
			record "$rep" "$BENCH" fill -P "$p" -a "${ADDR[$p]}" -n 100000 -s 16 \
				-p "${PID[$p]}" -H 1 -t retained
			stop_server "$p"
		done
	done
}

# Throughput, two ways of publishing:
#   paced     at most 4 MiB of messages ahead of the slowest subscriber:
#             below the slow-consumer limits of Redis and NATS (Mosquitto's
#             1000-message queue per client can still overflow with small
#             messages)
#   firehose  no limit: the servers' buffering and slow-consumer policies
#             decide (Redis drops a subscriber beyond 32 MiB of pending
#             output, NATS beyond 64 MiB)
phase_throughput() {
	local rep p size subs n mode w
	for p in $PROTOS; do    # a warm-up for each server, not kept
		record 0 "$BENCH" throughput -P "$p" -a "${ADDR[$p]}" -n 100000 -c 4 -T "$LIMIT"
	done
	for rep in $(seq "$REPS"); do
		for mode in paced firehose; do
			while read -r size subs n; do
				((QUICK)) && n=$((n / 20))
				w=0
				[ "$mode" = paced ] && w=$((4 * 1024 * 1024 / size))
				for p in $PROTOS; do
					record "$rep" "$BENCH" throughput -P "$p" -a "${ADDR[$p]}" \
						-n "$n" -s "$size" -c "$subs" -w "$w" -p "${PID[$p]}" -T "$LIMIT"
				done
			done <<<"$TP_CASES"
		done
	done
}

# Latency.  On a 2-CPU machine it depends mostly on where the scheduler
# puts the two ends, so it is measured three ways, each next to the floor
# (the same loop through an echo process):
#   any    nothing pinned (what a user gets)
#   same   servers and bench all on CPU 0 (no wake-up crosses CPUs)
#   split  servers on CPU 1, bench on CPU 0 (every wake-up crosses)
phase_latency() {
	local rep p size place n=$LAT_MSGS all pin echo_cpu
	((QUICK)) && n=2000
	all=0-$(($(nproc) - 1))
	for rep in $(seq "$REPS"); do
		for size in 16 1024; do
			for place in any same split; do
				case $place in
				any) pin=(); echo_cpu=-1 ;;
				same) set_affinity 0; pin=(taskset -c 0); echo_cpu=0 ;;
				split)
					(($(nproc) > 1)) || continue
					set_affinity 1; pin=(taskset -c 0); echo_cpu=1 ;;
				esac
				TAG="cpu=$place " record "$rep" "${pin[@]}" "$BENCH" floor \
					-n "$n" -s "$size" -C "$echo_cpu"
				for p in $PROTOS; do
					TAG="cpu=$place " record "$rep" "${pin[@]}" "$BENCH" latency \
						-P "$p" -a "${ADDR[$p]}" -n "$n" -s "$size" -p "${PID[$p]}"
				done
				set_affinity "$all"
			done
		done
	done
}

# One request per file, sent by socat as a shell script would pipe it.
write_cli_requests() {
	# shellcheck disable=SC2016  # RESP's "$7" is a length, not a variable
	printf '*3\r\n$7\r\nPUBLISH\r\n$1\r\nt\r\n$5\r\nhello\r\n' >"$RUN/pub.resp"
	# MQTT: CONNECT (clean session, empty client id), PUBLISH t hello, DISCONNECT
	printf '\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00\x30\x08\x00\x01thello\xe0\x00' \
		>"$RUN/pub.mqtt"
	printf 'CONNECT {"verbose":false}\r\nPUB t 5\r\nhello\r\nPING\r\n' >"$RUN/pub.nats"
	printf 'PUB t 5\nhello\nPING\n' >"$RUN/pub.notifyd"
}

# The commands the CLI phase times, one per line:
#   label | server whose subscriber sees it (- for none) | stdin (- for none) | command
# Each server's own CLI (NATS has none in Debian), socat piping the
# protocol's bytes, and bench pub1, the floor.
cli_commands() {
	cat <<-EOF
		true|-|-|true
		redis-cli|redis|-|redis-cli -s $RUN/redis.sock publish t hello
		socat-redis|redis|$RUN/pub.resp|socat - UNIX-CONNECT:$RUN/redis.sock
		bench-pub1-redis|redis|-|$BENCH pub1 -P redis -a ${ADDR[redis]} -t t -m hello
		mosquitto_pub|mqtt|-|mosquitto_pub --unix $RUN/mosq.sock -t t -m hello
		socat-mqtt|mqtt|$RUN/pub.mqtt|socat - UNIX-CONNECT:$RUN/mosq.sock
		bench-pub1-mqtt|mqtt|-|$BENCH pub1 -P mqtt -a ${ADDR[mqtt]} -t t -m hello
		socat-nats|nats|$RUN/pub.nats|socat - TCP:${ADDR[nats]#tcp:}
		bench-pub1-nats|nats|-|$BENCH pub1 -P nats -a ${ADDR[nats]} -t t -m hello
		notify_send|notifyd|-|$NOTIFY send --socket $RUN/notifyd.sock t hello
		socat-notifyd|notifyd|$RUN/pub.notifyd|socat - UNIX-CONNECT:$RUN/notifyd.sock
		bench-pub1-notifyd|notifyd|-|$BENCH pub1 -P notifyd -a ${ADDR[notifyd]} -t t -m hello
	EOF
}

# CLI: the cost of one publish from the command line, spawned in sequence
# by clirun; a subscriber per server counts what really arrived; peak RSS
# also as /usr/bin/time reports it; hyperfine once, to cross-check the
# timer.
phase_cli() {
	local rep runs=$CLI_RUNS warm=20 each cmds lpids p c label input cmd
	((QUICK)) && runs=100
	each=$((runs + warm))
	write_cli_requests
	cmds=$(cli_commands)

	for rep in $(seq "$REPS"); do
		lpids=()
		for p in $PROTOS; do
			c=$(cut -d'|' -f2 <<<"$cmds" | grep -cx "$p")
			rm -f "$RUN/ready.$p"
			timeout $((LIMIT * 3 + 30)) "$BENCH" listen -P "$p" -a "${ADDR[$p]}" -t t \
				-n $((c * each)) -T $((LIMIT * 3)) -r "$RUN/ready.$p" \
				>"$RUN/listen.$p" 2>>"$RUN/stderr.log" &
			lpids+=($!)
			LISTENERS=("${lpids[@]}")
			wait_until 10 test -e "$RUN/ready.$p"
		done
		while IFS='|' read -r label _ input cmd; do
			[ "$input" = - ] && input=/dev/null
			# shellcheck disable=SC2086  # $cmd is split into words on purpose
			record "$rep" "$CLIRUN" -n "$runs" -w "$warm" -l "$label" -i "$input" -- $cmd
		done <<<"$cmds"
		for p in "${lpids[@]}"; do wait "$p" || true; done
		LISTENERS=()
		for p in $PROTOS; do
			sed "s/^RESULT /RESULT rep=$rep /" "$RUN/listen.$p" | tee -a "$RESULTS" |
				sed 's/^RESULT //' >&2
		done
		# "Maximum resident set size" of /usr/bin/time -v.
		while IFS='|' read -r label _ input cmd; do
			[ "$input" = - ] && input=/dev/null
			# shellcheck disable=SC2086
			/usr/bin/time -f '%M' -o "$RUN/time.out" $cmd <"$input" >/dev/null 2>&1 || true
			echo "RESULT rep=$rep mode=timev label=$label maxrss_kb=$(tail -1 "$RUN/time.out")" \
				>>"$RESULTS"
		done <<<"$cmds"
	done

	hyperfine -N --warmup "$warm" --runs "$runs" --export-json "$RUN/hyperfine.json" \
		true "redis-cli -s $RUN/redis.sock publish t hello" \
		"mosquitto_pub --unix $RUN/mosq.sock -t t -m hello" >/dev/null 2>&1 || true
	python3 - "$RUN/hyperfine.json" >>"$RESULTS" <<-'EOF' || true
		import json, statistics, sys
		for r in json.load(open(sys.argv[1]))["results"]:
		    t = sorted(r["times"])
		    p95 = t[max(0, -(-95 * len(t) // 100) - 1)]
		    label = r["command"].split()[0]
		    print(f"RESULT rep=1 mode=hyperfine label={label} runs={len(t)} "
		          f"median_ms={statistics.median(t)*1e3:.3f} p95_ms={p95*1e3:.3f} "
		          f"mean_ms={statistics.mean(t)*1e3:.3f}")
	EOF
}
