#!/usr/bin/env bash
# Installs the notifyd .deb in a Debian bookworm root booted with systemd as PID 1 (systemd-nspawn --boot, no VM,
# no host systemd needed) and runs packaging/test/guest-test.sh inside it, twice: after installing, and after a
# reboot of the same root. Prints every check; the last line is "N passed, N failed"; exits 0 only if every phase
# passed: its guest test ran to its end (it marks that as its very last action), at least one check passed and none
# failed. A guest test that dies early, even before any check, is a failure, not "0 passed, 0 failed".
#
#   sudo packaging/test/systemd-e2e.sh path/to/notifyd_X_ARCH.deb
#
# The guest image (debootstrap minbase + systemd) is cached in $NOTIFYD_E2E_CACHE (default /var/tmp/notifyd-e2e):
# about 45 s to build once, a few seconds per boot after that. The guest has no network, so everything the package
# needs is in the image. Resource limits (MemoryMax= and the like) are not enforced in a container guest on a host
# with the hybrid cgroup layout; sandboxing (seccomp, namespaces, read-only mounts, NoNewPrivileges) is.
set -euo pipefail

deb=${1:?usage: $0 path/to/notifyd.deb}
here=$(cd "$(dirname "$0")" && pwd)
cache=${NOTIFYD_E2E_CACHE:-/var/tmp/notifyd-e2e}
suite=bookworm
image_packages="systemd,systemd-sysv,dbus,libpam-systemd,socat"
image_revision=1   # bump when prepare_image changes
boot_timeout=${NOTIFYD_E2E_BOOT_TIMEOUT:-300}
test_timeout=${NOTIFYD_E2E_TEST_TIMEOUT:-240}

say() { printf '[e2e %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "error: $*"; exit 2; }

[ "$(id -u)" -eq 0 ] || die "needs root (systemd-nspawn)"
[ -f "$deb" ] || die "no such package: $deb"

install_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
  if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "the kernel has no overlayfs"
}

# The Debian mirror the host's apt uses.
mirror() {
  { { cat /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | awk '/^URIs:/ {print $2}'
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } | awk '/^deb / {print $2}'; } |
    awk 'tolower($0) ~ /debian/ {print; exit}'
}

build_image() {
  local source key
  source=${NOTIFYD_E2E_MIRROR:-$(mirror)}
  [ -n "$source" ] || die "no Debian mirror found in the host's apt sources; set NOTIFYD_E2E_MIRROR"
  key=$(printf '%s|' "$suite" "$source" "$image_packages" "$image_revision" | sha256sum | cut -c1-12)
  image=$cache/image-$key
  if [ -f "$image/ready" ]; then say "image cached: $image"; return; fi
  say "building the guest image ($suite minbase with $image_packages) from $source"
  rm -rf "$image" "$image.partial"
  mkdir -p "$image.partial" "$cache/debs"
  if ! debootstrap --variant=minbase --cache-dir="$cache/debs" --include="$image_packages" \
      "$suite" "$image.partial/root" "$source" >"$image.partial/debootstrap.log" 2>&1; then
    tail -n 20 "$image.partial/debootstrap.log" >&2
    die "debootstrap failed"
  fi
  prepare_image "$image.partial/root"
  mv "$image.partial" "$image"
  touch "$image/ready"
  for old in "$cache"/image-*; do [ "$old" = "$image" ] || rm -rf "$old"; done
}

prepare_image() {
  local root=$1
  echo notifyd-e2e >"$root/etc/hostname"
  # Without a machine id every boot would be a first boot (systemd-firstboot prompts on the console).
  od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$root/etc/machine-id"
  ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"
  rm -f "$root"/var/cache/apt/archives/*.deb
}

# The unit that runs the guest test once the guest is up, and ends the boot with its result: SuccessAction= and
# FailureAction= (in [Unit]) make PID 1 exit, and systemd-nspawn returns the test's status.
add_test_unit() {
  local root=$1
  mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
  cat >"$root/etc/systemd/system/notifyd-e2e.service" <<'EOF'
[Unit]
Description=notifyd end-to-end test
After=multi-user.target
SuccessAction=exit
FailureAction=exit

[Service]
Type=oneshot
ExecStart=/bin/sh /e2e/in/run-phase.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
EOF
  ln -sf ../notifyd-e2e.service "$root/etc/systemd/system/multi-user.target.wants/notifyd-e2e.service"
}

write_phase_runner() {
  cat >"$1" <<'EOF'
#!/bin/sh
# Inside the guest: runs the checks of one phase and leaves the results in /e2e/out/<phase>.
phase=$(cat /e2e/in/phase)
out=/e2e/out/$phase
rm -rf "$out"; mkdir -p "$out"
# E2E_COMPLETE: the guest test creates it as its last action, so that a test that died early cannot pass.
export E2E_PHASE="$phase" E2E_RESULTS="$out/results" E2E_COMPLETE="$out/complete"
: >"$E2E_RESULTS"
timeout -k 5 "$(cat /e2e/in/test-timeout)" sh -c '. /e2e/in/checks.sh; . /e2e/in/guest-test.sh' >"$out/test.log" 2>&1
[ $? -eq 124 ] && echo "FAIL: the guest test timed out" >>"$E2E_RESULTS"
journalctl --sync 2>/dev/null
journalctl -b --no-pager -o short-monotonic >"$out/journal.txt" 2>&1
passed=$(grep -c '^PASS' "$E2E_RESULTS"); failed=$(grep -c '^FAIL' "$E2E_RESULTS")
echo "$passed $failed" >"$out/done"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] && [ -f "$E2E_COMPLETE" ]
EOF
}

# Without a host systemd, nspawn (with --keep-unit) puts the guest below our own cgroup; give it a subtree of its
# own so that anything left behind can be killed and removed.
cgroups=""
prepare_cgroups() {
  cgroups=""
  [ -d /run/systemd/system ] && return 0
  local name=notifyd-e2e-$$ own
  if awk '$2=="/sys/fs/cgroup/unified" && $3=="cgroup2" {found=1} END {exit !found}' /proc/mounts; then
    own=$(awk -F: '$1=="0" {print $3}' /proc/self/cgroup)
    cgroups="/sys/fs/cgroup/unified${own%/}/$name"
    own=$(awk -F: '$2=="name=systemd" {print $3}' /proc/self/cgroup)
    [ -d /sys/fs/cgroup/systemd ] && cgroups+=" /sys/fs/cgroup/systemd${own%/}/$name"
  elif [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    own=$(awk -F: '$1=="0" {print $3}' /proc/self/cgroup)
    cgroups="/sys/fs/cgroup${own%/}/$name"
  fi
  local directory
  for directory in $cgroups; do mkdir -p "$directory" || cgroups=""; done
}

clean_cgroups() {
  local directory
  for directory in $cgroups; do
    [ -d "$directory" ] || continue
    # nspawn killed hard leaves the guest's systemd running, re-parented: kill what is left.
    if [ -n "$(find "$directory" -name cgroup.procs -exec cat {} + 2>/dev/null)" ]; then
      say "warning: processes left in $directory; killing them"
      if [ -e "$directory/cgroup.kill" ]; then echo 1 >"$directory/cgroup.kill"
      else find "$directory" -name cgroup.procs -exec cat {} + | xargs -r kill -9; fi
      sleep 1
    fi
    find "$directory" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# One boot: a private mount namespace holds the overlay root (image below, this run's changes above) and a tmpfs on
# /run/systemd/nspawn, so nothing leaks into the host. timeout ends it with SIGTERM (a clean halt), then SIGKILL.
boot() {
  local phase=$1 status=0
  echo "$phase" >"$run/in/phase"
  local options=(-D "$run/root" --boot --machine="notifyd-e2e-$$" --private-network --link-journal=no
    --console=read-only --register=no --setenv=SYSTEMD_COLORS=0
    --bind-ro="$run/in:/e2e/in" --bind="$run/out:/e2e/out")
  [ -d /run/systemd/system ] || options+=(--keep-unit)
  prepare_cgroups
  LOWER=$image/root RUN=$run CGROUPS=$cgroups \
  timeout -k 20 "$boot_timeout" unshare --mount --propagation private -- /bin/sh -c '
      set -e
      mkdir -p /run/systemd/nspawn
      mount -t tmpfs -o mode=0755 notifyd-e2e /run/systemd/nspawn
      mount -t overlay notifyd-e2e -o "lowerdir=$LOWER,upperdir=$RUN/upper,workdir=$RUN/work" "$RUN/root"
      for directory in $CGROUPS; do echo $$ >"$directory/cgroup.procs"; done
      exec systemd-nspawn "$@"' sh "${options[@]}" >"$run/boot-$phase.log" 2>&1 </dev/null &
  booting=$!
  wait "$booting" || status=$?
  booting=""
  clean_cgroups
  return $status
}

booting=""
on_signal() {
  trap - INT TERM
  if [ -n "$booting" ]; then
    kill -TERM "$booting" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$booting" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$booting" 2>/dev/null || true
  fi
  clean_cgroups
  exit 130
}
trap on_signal INT TERM

install_tools
mkdir -p "$cache"
build_image
run=$cache/run
rm -rf "$run"
mkdir -p "$run"/{in,out,upper,work,root}
cp "$deb" "$run/in/notifyd.deb"
cp "$here/checks.sh" "$here/guest-test.sh" "$run/in/"
write_phase_runner "$run/in/run-phase.sh"
echo "$test_timeout" >"$run/in/test-timeout"
add_test_unit "$run/upper"

total_passed=0
total_failed=0
for phase in install reboot; do
  say "phase $phase: booting the guest"
  started=$SECONDS
  status=0
  boot "$phase" || status=$?
  say "phase $phase: the guest exited ($status) after $((SECONDS - started)) s"
  out=$run/out/$phase
  [ -f "$out/results" ] && sed "s/^/[$phase] /" "$out/results"
  passed=0 failed=0
  [ -f "$out/done" ] && read -r passed failed <"$out/done"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  # Why the phase failed beyond its own FAIL lines, if it did; the next phase builds on this one, so it stops there.
  problem="" log=""
  if [ ! -f "$out/done" ]; then
    problem="the guest did not finish (status $status); the console said:"
    log=$run/boot-$phase.log
  elif [ ! -f "$out/complete" ]; then
    problem="the guest test did not run to its end; its output ended with:"
    log=$out/test.log
  elif [ "$passed" -eq 0 ]; then
    problem="no check passed"
  elif [ "$failed" -eq 0 ] && [ "$status" -ne 0 ]; then
    problem="the guest exited with status $status; the console said:"
    log=$run/boot-$phase.log
  fi
  if [ -n "$problem" ]; then
    echo "FAIL: [$phase] $problem"
    [ -z "$log" ] || tail -n 40 "$log" | sed 's/^/    /'
    total_failed=$((total_failed + 1))
    break
  fi
done
[ "$total_failed" -eq 0 ] || say "details: $run/boot-*.log and $run/out/*/{test.log,journal.txt}"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
