#!/usr/bin/env bash
# What a start costs in memory: the RSS of an idle notifyd 1 s after it starts (as the anchors harness reads it),
# anonymous and file-backed pages apart, with the mappings that hold the most; and the RSS of a `notify send`
# caught while it waits for the daemon's greeting (on a socket that accepts and says nothing), which is all of its
# start-up. Prints one line per run and per binary; NOTIFYD and NOTIFY may each name several binaries
# (space-separated), which are then alternated.
#   packaging/build-deb.sh && Benchmarks/StartupMemory/run.sh       # the packaged binaries, by default
#   NOTIFYD=".build/release/notifyd /usr/sbin/notifyd" NOTIFY="" Benchmarks/StartupMemory/run.sh
#
# Each binary is dropped from the page cache first (and run once), every run: a binary just written sits in the
# page cache in large folios, and the kernel then maps more of it around each page touched (some MiB more RSS for
# the same pages used), so figures of a fresh build and of an installed one differ unless both start this way.
set -euo pipefail
cd "$(dirname "$0")/../.."
stage=.build/deb/notifyd_$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/NotifyProtocol/Host/NotifydRelease.swift)_$(dpkg --print-architecture 2>/dev/null || echo amd64)
NOTIFYD=${NOTIFYD-$stage/usr/sbin/notifyd}
NOTIFY=${NOTIFY-$stage/usr/bin/notify}
REPS=${REPS:-3}
work=$(mktemp -d)
daemon_pid=""
trap '[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; rm -rf "$work"' EXIT

cold() {
  python3 - "$1" <<'PY'
import os, sys
descriptor = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(descriptor)
os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(descriptor)
PY
  "$1" --version >/dev/null || { echo "run.sh: $1 --version failed" >&2; exit 1; }
}

daemon_idle() {
  local binary=$1 dir
  dir=$(mktemp -d "$work/daemon.XXXX")
  cold "$binary"
  "$binary" --socket "$dir/s" --state-dir "$dir/state" --config /dev/null 2>"$dir/log" &
  daemon_pid=$!
  for _ in $(seq 200); do [ -S "$dir/s" ] && break; sleep 0.05; done
  [ -S "$dir/s" ] || { echo "run.sh: $binary made no socket:" >&2; cat "$dir/log" >&2; exit 1; }
  sleep 1  # as the anchors harness reads it: a second after the socket is there
  python3 - "$daemon_pid" "$binary" <<'PY'
import sys
pid, binary = sys.argv[1], sys.argv[2]
status = {}
for line in open(f"/proc/{pid}/status"):
    key, _, value = line.partition(":")
    if key in ("VmRSS", "RssAnon", "RssFile"):
        status[key] = int(value.split()[0])
per_mapping, name = {}, None
for line in open(f"/proc/{pid}/smaps"):
    fields = line.split()
    if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
        name = fields[5].rsplit("/", 1)[-1] if len(fields) > 5 else "[anonymous]"
    elif fields[0] == "Rss:":
        per_mapping[name] = per_mapping.get(name, 0) + int(fields[1])
top = ", ".join(f"{n} {kib}" for n, kib in sorted(per_mapping.items(), key=lambda item: -item[1])[:6])
print(f"notifyd idle {binary}: RSS {status['VmRSS']} KiB (anonymous {status['RssAnon']}, "
      f"file {status['RssFile']}); most: {top}")
PY
  kill "$daemon_pid"
  wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=""
}

cli_send() {
  local binary=$1
  cold "$binary"
  python3 - "$binary" "$work/silent.sock" <<'PY'
import os, socket, subprocess, sys, time
binary, path = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
listener = socket.socket(socket.AF_UNIX)
listener.bind(path)
listener.listen(1)
listener.settimeout(10)
sender = subprocess.Popen([binary, "--socket", path, "send", "startup.memory", "hello"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
try:
    connection, _ = listener.accept()
except socket.timeout:
    sender.kill()
    sys.exit(f"run.sh: {binary} send did not connect in 10 s: {sender.communicate()[1].decode(errors='replace')}")
# The greeting is what it waits for; once connected, it has nothing left to start. Wait (2 s at most) until every
# thread of it sleeps.
def sleeping(task):
    return open(f"/proc/{sender.pid}/task/{task}/stat").read().rsplit(")", 1)[1].split()[0] == "S"
deadline = time.monotonic() + 2
while not all(sleeping(task) for task in os.listdir(f"/proc/{sender.pid}/task")) and time.monotonic() < deadline:
    time.sleep(0.01)
status = {}
for line in open(f"/proc/{sender.pid}/status"):
    key, _, value = line.partition(":")
    if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
        status[key] = int(value.split()[0])
sender.kill()
sender.wait()
print(f"notify send {binary}: RSS {status['VmRSS']} KiB waiting for the greeting, peak {status['VmHWM']} "
      f"(anonymous {status['RssAnon']}, file {status['RssFile']})")
PY
}

for _ in $(seq "$REPS"); do
  for binary in $NOTIFYD; do daemon_idle "$binary"; done
  for binary in $NOTIFY; do cli_send "$binary"; done
done
