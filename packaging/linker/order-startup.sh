#!/usr/bin/env bash
# Writes packaging/linker/notifyd.order, notifyd-http.order and notify.order (and the .ld beside each): the
# functions that a start of notifyd (then its first clients and a burst), a start of notifyd-http (then its first
# requests and a stream) and one `notify send` run, in the order they first run. build-deb.sh links them first, side
# by side, so that start-up touches a few hundred KiB of text instead of pages spread over all of it (flags.sh says
# why).
#
#   sudo env PATH="$PATH" packaging/linker/order-startup.sh    # a few minutes (sudo's own PATH has no swift);
#                                                              # run it again when start-up code has changed much
#   sudo env PATH="$PATH" ORDERS=notifyd-http packaging/linker/order-startup.sh    # one binary's order only
#   sudo env PATH="$PATH" ORDERS=notify packaging/linker/order-startup.sh          # notify's (see below)
#
# How: build the binaries as packaged (in .build-order), then for each, until no new function shows up (or only a
# few, three rounds in a row): drop the binary from the page cache and turn read-ahead off on its disk, so that each
# page it touches faults on its own instead of 64 KiB at a time; record the page faults of its scenario (for the
# daemon: a start, its first clients and a burst; for notify: one `notify send`) with perf; find, in the link map,
# the input section each page fault executed first; link again. A section with a symbol goes into NAME.order; one
# without (LLVM's private functions: closure contexts' destroy functions, key path accessors, `.L__unnamed_N`; the
# runtime's C++ functions of internal linkage) into NAME.ld, a linker script that places them by object and section
# just before .text: left where they were, those few KiB of code kept some 1.5 MiB of the daemon's text resident,
# 64 KiB around each (docs/performance.md, idle RSS). Sections that hold more than one function (the parts of the
# static Swift runtime built without function sections) cannot be moved, and are left out. The files are replaced
# only once all are made.
#
# notify's order is left as it is unless ORDERS names it: made again by this method, it measured 3,276 KiB at
# `notify send` against 3,024 with the order kept (Benchmarks/StartupMemory/run.sh, 7 runs each, 2026-12-08).
# Needs root (read-ahead, perf), perf, python3, swift, and the repository on a block device's file system.
set -euo pipefail
cd "$(dirname "$0")/../.."
cd "$(pwd -P)"  # perf reports real paths; so must the binaries' paths here
linker=packaging/linker
work=$(mktemp -d)
ra_file=""
ra_saved=""
cleanup() {
  [ -n "$ra_file" ] && [ -n "$ra_saved" ] && echo "$ra_saved" >"$ra_file"
  [ -n "${daemon_pid:-}" ] && { kill "$daemon_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf 'order-startup: %s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || { say "needs root (it turns read-ahead off for a moment, and runs perf)"; exit 1; }
command -v perf >/dev/null || { say "needs perf (apt-get install linux-perf)"; exit 1; }
command -v swift >/dev/null || { say "needs swift on PATH (sudo env PATH=\"\$PATH\" $0)"; exit 1; }

# The orders are made in $work, and copied to packaging/linker at the end.
source "$linker/flags.sh"
# ORDERS names the binaries whose order is made again (the daemon's and the gateway's by default); the others keep
# theirs.
orders=${ORDERS:-notifyd notifyd-http}
for name in notifyd notifyd-http notify; do
  case " $orders " in
    *" $name "*)
      : >"$work/$name.order"
      printf 'SECTIONS {\n  .text.startup.unnamed : {\n  }\n}\nINSERT BEFORE .text;\n' >"$work/$name.ld"
      ;;
    *) cp "$linker/$name.order" "$linker/$name.ld" "$work/" ;;
  esac
done
remake() { case " $orders " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
packaged_build_flags .build-order "$work"
bin=$(swift build "${daemon_build[@]}" --show-bin-path)
daemon=$bin/notifyd
gateway=$bin/notifyd-http
cli=$bin/notify-static
# Links NAME again, as packaged, with its order and a map of where each function went (its names as the order
# needs them: not demangled).
link() {
  local map=(-Xlinker --no-demangle -Xlinker -Map="$work/$1.map")
  case $1 in
    notifyd) swift build "${daemon_build[@]}" "${map[@]}" --product notifyd >/dev/null ;;
    notifyd-http) swift build "${gateway_build[@]}" "${map[@]}" --product notifyd-http >/dev/null ;;
    notify)
      swift build "${cli_build[@]}" --product notify >/dev/null
      link_static_notify "$bin" "$cli" "${map[@]}" >/dev/null 2>&1
      ;;
  esac
}
say "building notifyd, notifyd-http and notify as packaged, in .build-order (the first round builds everything)"
for name in notifyd notifyd-http notify; do link "$name"; done

# The file holding the disk's read-ahead, for the disk the binaries are on (a partition's is its disk's).
device=$(stat -c '%Hd:%Ld' "$daemon")
for candidate in "/sys/dev/block/$device/queue/read_ahead_kb" "/sys/dev/block/$device/../queue/read_ahead_kb"; do
  [ -f "$candidate" ] && { ra_file=$candidate; break; }
done
[ -n "$ra_file" ] || { say "no read-ahead setting for device $device, which holds $daemon: it must be on a block device's file system"; exit 1; }

wait_for_socket() {
  for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done
  say "no socket at $1"
  exit 1
}

# Runs "$@" (a scenario) with the binary out of the page cache and read-ahead off while it starts.
cold() {
  local binary=$1
  shift
  sync
  dd if="$binary" iflag=nocache count=0 status=none
  ra_saved=$(cat "$ra_file")
  echo 0 >"$ra_file"
  "$@"
  echo "$ra_saved" >"$ra_file"
  ra_saved=""
}

# The daemon's scenario: start, settle, one client of each kind, then a burst.
scenario_notifyd() {
  local run=$work/run-notifyd
  rm -rf "$run" && mkdir -p "$run"
  perf record -q -e page-faults -c 1 -d -o "$work/perf.data" -- \
    "$daemon" --socket "$run/n.sock" --state-dir "$run/state" --config /dev/null 2>/dev/null &
  daemon_pid=$!
  wait_for_socket "$run/n.sock"
  sleep 1  # its start-up timers
  "$cli" --socket "$run/n.sock" send order.test hello >/dev/null
  "$cli" --socket "$run/n.sock" latest order.test >/dev/null
  "$cli" --socket "$run/n.sock" subscribe --count 1 --timeout 5 'order.>' >/dev/null &
  local subscriber=$!
  sleep 0.2  # its subscription in place; if not, --timeout ends it all the same
  "$cli" --socket "$run/n.sock" send order.test again >/dev/null
  wait "$subscriber" || true
  # A burst with fan-out, for the code a busy daemon runs (publish batches, queues, flow control), so that serving
  # it after start touches pages laid out together too (Benchmarks/IdleAfterBurst).
  "$cli" --socket "$run/n.sock" bench --skip-latency --subscribers 20 --count 20000 >/dev/null
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || true
  daemon_pid=""
}

# The gateway's scenario, beside a daemon of its own: start (as nobody: it refuses root), settle, a publish,
# `latest`, the page, /metrics, and a stream that gets a message.
scenario_notifyd_http() {
  local run=$work/run-http port=18599
  rm -rf "$run" && mkdir -p "$run" && chmod 755 "$run"
  "$daemon" --socket "$run/n.sock" --state-dir "$run/state" --config /dev/null 2>/dev/null &
  daemon_pid=$!
  wait_for_socket "$run/n.sock"
  perf record -q -e page-faults -c 1 -d -o "$work/perf.data" -- \
    setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$gateway" --socket "$run/n.sock" --listen "127.0.0.1:$port" --allow-anonymous >"$run/gateway.out" 2>&1 &
  local gateway_pid=$!
  for _ in $(seq 200); do grep -q listening "$run/gateway.out" 2>/dev/null && break; sleep 0.05; done
  sleep 1  # its start-up timers
  local url=http://127.0.0.1:$port
  curl -s -d hello "$url/order.test" >/dev/null
  curl -s "$url/order.test/latest" >/dev/null
  curl -s "$url/" >/dev/null
  curl -s "$url/metrics" >/dev/null
  curl -sN --max-time 3 "$url/order.test/sse" >/dev/null &
  local stream=$!
  sleep 0.3  # the stream open; if not, --max-time ends it all the same
  curl -s -d again "$url/order.test" >/dev/null
  wait "$stream" || true
  kill -TERM "$gateway_pid"
  wait "$gateway_pid" || true
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || true
  daemon_pid=""
}

# The CLI's scenario: one `notify send` to a daemon started beforehand.
scenario_notify() {
  perf record -q -e page-faults -c 1 -d -o "$work/perf.data" -- \
    "$cli" --socket "$work/run-notify/n.sock" send order.test hello >/dev/null
}

# Adds to $work/NAME.all what executed first on each page in the last recording: the function, found in the link
# map as the input section the fault's address lies in. A function LLVM gave no symbol (private linkage: a closure
# context's destroy function, a key path accessor, `.L__unnamed_N`) cannot be named in the order, so it goes into
# NAME.ld, a linker script that places those sections, by object and section, just before .text: left where they
# were, they kept dozens of 64 KiB blocks of text resident for some bytes of code each. Writes NAME.order and
# NAME.ld, without sections that hold more than one function (the parts of the static Swift runtime built without
# function sections), and prints how many were new and how many are kept.
collect() {
  local name=$1 binary=$2
  perf script --no-demangle -i "$work/perf.data" --show-mmap-events -F addr,ip 2>"$work/perf-script.log" \
    >"$work/faults" || {
    cat "$work/perf-script.log" >&2
    return 1
  }
  python3 - "$work/faults" "$binary" "$work/$name.all" "$work/$name.map" "$work/$name.order" "$work/$name.ld" <<'PY'
import bisect, re, subprocess, sys
faults, binary, all_path, map_path, order_path, script_path = sys.argv[1:]
try:
    known_list = [line.rstrip('\n') for line in open(all_path)]
except FileNotFoundError:
    known_list = []
known = set(known_list)
# The map lists each output section, then its input sections (`object:(section)`), each followed by its symbols.
sections, in_text = [], False
for line in open(map_path):
    parts = line.split()
    if len(parts) == 5 and parts[4].startswith('.') and ':(' not in line:
        in_text = parts[4] == '.text' or parts[4].startswith('.text.')
    elif in_text and len(parts) == 5 and ':(' in parts[4]:
        sections.append([int(parts[0], 16), int(parts[2], 16), parts[4], None])
    elif in_text and len(parts) == 5 and sections and sections[-1][3] is None:
        sections[-1][3] = parts[4]
sections.sort()
starts = [section[0] for section in sections]

def script_pattern(where):
    # `/…/NIOCore.build/EventLoop.swift.o:(.text..Lobjectdestroy.5)` → `*/NIOCore.build/EventLoop.swift.o(…)`, so
    # that the script does not depend on where the build was; an archive's member is `archive:member`.
    path, section = re.match(r'(.*):\((.*)\)$', where).groups()
    member = re.match(r'(.*)\((.*)\)$', path)
    if member:
        return '*' + member.group(1).split('/')[-1] + ':' + member.group(2) + '(' + section + ')'
    return '*/' + '/'.join(path.split('/')[-2:]) + '(' + section + ')'

# Where the binary's first segment is linked (0 for a position-independent one, 0x400000 for notify, linked
# static): its mapping at offset 0 starts there plus the load bias.
first_segment = min(int(m.group(1), 16) for m in re.finditer(
    r'^\s*LOAD\s+0x0+\s+(0x[0-9a-f]+)', subprocess.run(['readelf', '-lW', binary], capture_output=True, text=True).stdout,
    re.M))
base, new = None, 0
for line in open(faults):
    if 'PERF_RECORD_MMAP' in line:
        m = re.search(r'\[(0x[0-9a-f]+)\(0x[0-9a-f]+\) @ 0 .*\s(\S+)$', line.rstrip())
        if m and base is None and m.group(2) == binary:
            base = int(m.group(1), 16) - first_segment
        continue
    parts = line.split()
    # An instruction fetch faults where addr is ip.
    if base is None or len(parts) != 2 or parts[0] != parts[1]:
        continue
    address = int(parts[0], 16) - base
    index = bisect.bisect_right(starts, address) - 1
    if index < 0:
        continue
    start, size, where, symbol = sections[index]
    if not start <= address < start + size or size > 16384:
        continue
    entry = symbol if symbol is not None else '@' + script_pattern(where)
    if entry not in known:
        known.add(entry)
        known_list.append(entry)
        new += 1
open(all_path, 'w').write(''.join(entry + '\n' for entry in known_list))
symbols = [entry for entry in known_list if not entry.startswith('@')]
unnamed = [entry[1:] for entry in known_list if entry.startswith('@')]
open(order_path, 'w').write(''.join(symbol + '\n' for symbol in symbols))
script = ('/* Written by order-startup.sh: the start-up\'s functions that have no symbol, before .text. */\n'
          'SECTIONS {\n  .text.startup.unnamed : {\n' + ''.join('    ' + pattern + '\n' for pattern in unnamed)
          + '  }\n}\nINSERT BEFORE .text;\n')
open(script_path, 'w').write(script)
print(new, len(symbols) + len(unnamed))
PY
}

# Links NAME again with its order and a map, runs its scenario cold, until no new function shows up, or only a few
# three rounds in a row (what a burst runs varies a little from run to run).
converge() {
  local name=$1 binary=$2 quiet=0
  for round in $(seq 1 40); do
    rm -f "$binary"
    link "$name"
    cold "$binary" "scenario_${name//-/_}"
    collect "$name" "$binary" >"$work/counts"
    read -r new kept <"$work/counts"
    say "$name, round $round: $new new functions; $kept in the order"
    if [ "$round" -eq 1 ] && [ "$new" -eq 0 ]; then
      say "$name: no page fault of $binary was found in perf's record; nothing is written"
      exit 1
    fi
    [ "$new" -eq 0 ] && return 0
    if [ "$new" -le 3 ]; then quiet=$((quiet + 1)); else quiet=0; fi
    [ "$quiet" -ge 3 ] && return 0
  done
  say "$name: still finding functions after 40 rounds; the order is written as it is"
}

remake notifyd && converge notifyd "$daemon"
remake notifyd-http && converge notifyd-http "$gateway"
if remake notify; then
  mkdir -p "$work/run-notify"
  "$daemon" --socket "$work/run-notify/n.sock" --state-dir "$work/run-notify/state" --config /dev/null 2>/dev/null &
  daemon_pid=$!
  wait_for_socket "$work/run-notify/n.sock"
  converge notify "$cli"
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || true
  daemon_pid=""
fi
for name in notifyd notifyd-http notify; do cp "$work/$name.order" "$work/$name.ld" "$linker/"; done
say "wrote $linker/notifyd.order ($(wc -l <"$linker/notifyd.order") functions)," \
  "$linker/notifyd-http.order ($(wc -l <"$linker/notifyd-http.order") functions) and" \
  "$linker/notify.order ($(wc -l <"$linker/notify.order") functions)"
