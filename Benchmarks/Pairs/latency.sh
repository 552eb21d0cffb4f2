#!/usr/bin/env bash
# `notify bench`'s latency phase against two builds of notifyd running side by side, alternated, REPS times, pinned
# (daemon and bench on CPU 0, no wake-up crossing CPUs) and not: a change's cost to the tail read from runs side by
# side on a shared, noisy machine, as medians.
#
#   A=DIR B=DIR [REPS=5] [SIZES="16 1024"] [NOTIFY=path] Benchmarks/Pairs/latency.sh
#
# DIR holds a notifyd; NOTIFY is the `notify` that benchmarks (default: A's, else the one on PATH). Each daemon starts
# with its defaults on a socket and state directory of its own. Prints each build's median p50 and p99 (µs) per size
# and placement, with each round's p99; the raw JSON lines go to $RUN/latency.txt (RUN defaults to a new temporary
# directory, kept).
set -euo pipefail
: "${A:?A=DIR holding the first notifyd}" "${B:?B=DIR holding the second}"
REPS=${REPS:-5}
SIZES=${SIZES:-"16 1024"}
NOTIFY=${NOTIFY:-$( [ -x "$A/notify" ] && echo "$A/notify" || command -v notify )}
RUN=${RUN:-$(mktemp -d)}
all=0-$(($(nproc) - 1))
declare -A PID SOCK
for name in A B; do
  dir=${!name}
  mkdir -p "$RUN/$name"
  "$dir/notifyd" --socket "$RUN/$name/s" --state-dir "$RUN/$name/state" >"$RUN/$name/log" 2>&1 &
  PID[$name]=$!
  SOCK[$name]=$RUN/$name/s
done
trap 'kill "${PID[A]}" "${PID[B]}" 2>/dev/null || true' EXIT
for name in A B; do
  for _ in $(seq 200); do [ -S "${SOCK[$name]}" ] && break; sleep 0.05; done
  [ -S "${SOCK[$name]}" ] || { echo "latency.sh: build $name did not start; see $RUN/$name/log" >&2; exit 1; }
done
: >"$RUN/latency.txt"
for round in $(seq "$REPS"); do
  order=(A B)
  ((round % 2)) || order=(B A)
  for size in $SIZES; do
    for place in same any; do
      for name in "${order[@]}"; do
        pin=()
        if [ "$place" = same ]; then taskset -a -p -c 0 "${PID[$name]}" >/dev/null; pin=(taskset -c 0); fi
        json=$("${pin[@]}" "$NOTIFY" bench --socket "${SOCK[$name]}" --skip-throughput --size "$size" --format json)
        echo "$name $size $place $json" >>"$RUN/latency.txt"
        taskset -a -p -c "$all" "${PID[$name]}" >/dev/null
      done
    done
  done
  echo "round $round of $REPS done" >&2
done
python3 - "$RUN/latency.txt" "$A" "$B" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, size, place, text = line.split(" ", 3)
    latency = json.loads(text)["latency"]
    rows.setdefault((int(size), place), {}).setdefault(name, []).append((latency["p50_us"], latency["p99_us"]))
print(f"A = {sys.argv[2]}\nB = {sys.argv[3]}\n")
print("| payload B | place | A p50 / p99 µs | B p50 / p99 µs | B / A p99 | A p99 by round | B p99 by round |")
print("| ---: | --- | ---: | ---: | ---: | --- | --- |")
med = lambda runs, i: statistics.median(r[i] for r in runs)
for (size, place), builds in sorted(rows.items()):
    a, b = builds["A"], builds["B"]
    print(f"| {size} | {place} | {med(a, 0):.1f} / {med(a, 1):.1f} | {med(b, 0):.1f} / {med(b, 1):.1f}"
          f" | {med(b, 1) / med(a, 1):.2f} | {', '.join(f'{r[1]:.0f}' for r in a)} | {', '.join(f'{r[1]:.0f}' for r in b)} |")
PY
