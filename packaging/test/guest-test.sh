# The checks, run as root inside the booted guest after multi-user.target, once per phase ($E2E_PHASE is install or
# reboot). Helpers: checks.sh.
SOCKET=/run/notifyd/notifyd.sock
TESTER=tester
TESTER_UID=1500
is() { [ "$(systemctl is-active "$1")" = "$2" ]; }
as_tester() { runuser -u $TESTER -- "$@"; }
as_tester_session() { runuser -u $TESTER -- env XDG_RUNTIME_DIR=/run/user/$TESTER_UID "$@"; }
journal() { journalctl --sync; journalctl -b --no-pager "$@"; }

if [ "$E2E_PHASE" = install ]; then
  check  "dpkg -i installs the package" dpkg -i /e2e/in/notifyd.deb
  expect "postinst enabled notifyd.socket" enabled systemctl is-enabled notifyd.socket
  expect "postinst started notifyd.socket" active systemctl is-active notifyd.socket
  check  "sysusers made the notifyd user" getent passwd notifyd
  for unit in notifyd.socket notifyd.service; do
    expect "systemd-analyze verify $unit: no complaints" "status 0" \
      sh -c "systemd-analyze verify --man=no /lib/systemd/system/$unit 2>&1; echo status \$?"
  done
  for unit in notifyd.socket notifyd.service; do
    expect "systemd-analyze verify the user's $unit: no complaints" "status 0" \
      sh -c "systemd-analyze verify --man=no /usr/lib/systemd/user/$unit 2>&1; echo status \$?"
  done
  useradd --create-home --uid $TESTER_UID $TESTER
else
  expect "notifyd.socket active after the reboot" active systemctl is-active notifyd.socket
fi

expect "notifyd.service idle until the first client (socket activation)" inactive systemctl is-active notifyd.service

if [ "$E2E_PHASE" = install ]; then
  check  "notify send, as an unprivileged user, reaches the system daemon" as_tester notify send e2e.hello world
  expect "notify latest returns the message" world as_tester notify latest e2e.hello
  check  "a message to keep across the reboot" notify send e2e.persist "survives reboots"
else
  expect "the buffered message survived the reboot (state directory)" "survives reboots" notify latest e2e.persist
  expect_match "its sequence number survived too" '"seq":1,' notify latest e2e.persist --format json
fi

within 10 is notifyd.service active
expect "notifyd.service active after the first client" active systemctl is-active notifyd.service
expect "notifyd.service is Type=notify" notify systemctl show -P Type notifyd.service
expect_match "STATUS= reached systemd" '^[0-9]+ connections, [0-9]+ topics \([0-9]+ buffered\), [0-9]+ subscriptions, [0-9]+ msg/s in' \
  systemctl show -P StatusText notifyd.service
expect_match "the watchdog is armed" '^30s$' systemctl show -P WatchdogUSec notifyd.service

# Who published: uid, pid and the systemd unit, from the kernel.
check  "a publish from a transient service" systemd-run --wait --quiet --unit e2e-publisher notify send e2e.unit from-a-unit
expect_match "deliveries carry the publisher's unit" '"unit":"e2e-publisher.service"' notify latest e2e.unit --format json

# The journal: lines, and structured fields.
expect_match "journalctl -u notifyd has the daemon's lines" 'notifyd 0.1.0 listening' journal -u notifyd -o cat
check  "clear a buffered message" sh -c 'notify send e2e.cleared x && notify clear e2e.cleared'
expect_match "journalctl -u notifyd TOPIC=… finds the structured entry" 'buffered message of e2e.cleared cleared' \
  journal -u notifyd TOPIC=e2e.cleared -o cat
expect_match "the entry has the peer's uid" '^PEER_UID=0$' journal -u notifyd TOPIC=e2e.cleared -o export
expect_match "the entry has the peer's pid" '^PEER_PID=[0-9]+$' journal -u notifyd TOPIC=e2e.cleared -o export
expect_match "the entry has the event's message id" '^MESSAGE_ID=de9f50bd8d0740a481d146722b8bdbac$' journal -u notifyd TOPIC=e2e.cleared -o export
if [ "$E2E_PHASE" = install ]; then
  expect "the system socket is mode 0666, owned by notifyd" "666 notifyd notifyd" stat -c '%a %U %G' $SOCKET
  # Access rules from /etc/notifyd/notifyd.conf, applied by systemctl reload: a rule by systemd unit.
  cp /etc/notifyd/notifyd.conf /tmp/notifyd.conf.orig
  printf '[rules]\nfrom-unit = allow publish e2e.units.> unit:e2e-allowed.service\nothers = deny publish e2e.units.> everyone\n' \
    >> /etc/notifyd/notifyd.conf
  check  "systemctl reload notifyd with access rules" systemctl reload notifyd
  within 10 sh -c 'notify send e2e.units.probe x >/dev/null 2>&1; [ $? -eq 77 ]'
  expect "a rule by unit refuses a peer outside the unit (77)" 77 sh -c 'notify send e2e.units.x y >/dev/null 2>&1; echo $?'
  check  "and admits a peer in the unit" systemd-run --wait --quiet --unit e2e-allowed notify send e2e.units.x from-unit
  expect "the unit's message is the buffered one" from-unit notify latest e2e.units.x
  expect_match "notify explain names the deciding rule" \
    '^publish: denied for uid 0, by rule others \(line [0-9]+\): deny publish e2e.units.> everyone$' notify explain e2e.units.x
  cp /tmp/notifyd.conf.orig /etc/notifyd/notifyd.conf
  check  "systemctl reload notifyd without them" systemctl reload notifyd
  within 10 notify send e2e.units.probe x
fi
expect "a refused publish exits 77" 77 sh -c 'notify send "\$reserved.x" y >/dev/null 2>&1; echo $?'
expect_match "and is logged with its MESSAGE_ID" 'reserved for the daemon' journal MESSAGE_ID=d1ac439938a34eee8a3ee6267006cb0c -o cat

# Hardening: as configured, and as enforced on the running process.
for setting in ProtectSystem=strict NoNewPrivileges=yes RestrictAddressFamilies=AF_UNIX PrivateNetwork=yes \
               MemoryDenyWriteExecute=yes ProtectHome=yes PrivateDevices=yes User=notifyd; do
  expect "property $setting" "${setting#*=}" systemctl show -P "${setting%%=*}" notifyd.service
done
expect_match "the system call filter is an allow-list" '^[^~].* epoll_wait ' systemctl show -P SystemCallFilter notifyd.service
systemd-analyze security --no-pager notifyd.service >"$(dirname "$E2E_RESULTS")/security.txt" 2>&1
exposure=$(sed -n 's/.*Overall exposure level for notifyd.service: \([0-9.]*\).*/\1/p' "$(dirname "$E2E_RESULTS")/security.txt")
check  "systemd-analyze security: exposure ${exposure:-unknown} (at most 2.0)" awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'

pid=$(systemctl show -P MainPID notifyd.service)
check  "the main pid is known" test "${pid:-0}" -gt 0
expect "kernel: no new privileges" 1 awk '/^NoNewPrivs:/ {print $2}' /proc/$pid/status
expect "kernel: seccomp filter active" 2 awk '/^Seccomp:/ {print $2}' /proc/$pid/status
expect "kernel: runs as the notifyd user" "$(id -u notifyd)" awk '/^Uid:/ {print $2}' /proc/$pid/status
check  "kernel: its own network namespace" test "$(readlink /proc/$pid/ns/net)" != "$(readlink /proc/1/ns/net)"
check  "kernel: /usr is read-only for it" sh -c "grep -Eq ' /usr [^ ]+ ro,' /proc/$pid/mountinfo || grep -Eq ' / [^ ]+ ro,' /proc/$pid/mountinfo"
check  "the daemon still works under all of it" sh -c 'notify send e2e.hardened ok && test "$(notify latest e2e.hardened)" = ok'

if [ "$E2E_PHASE" = install ]; then
  # systemctl reload: a new limit applies to new connections, in the same process.
  pid_before=$pid
  printf 'max-payload = 1000\n' >>/etc/notifyd/notifyd.conf
  check  "systemctl reload notifyd" systemctl reload notifyd
  expect "still active after the reload" active systemctl is-active notifyd.service
  expect "same process, not restarted" "$pid_before" systemctl show -P MainPID notifyd.service
  expect_match "the reload is logged" 'configuration reloaded' journal -u notifyd -o cat
  expect_match "new connections get the new limit" 'max_payload=1000 ' sh -c "socat -t 1 - UNIX-CONNECT:$SOCKET </dev/null | head -n 1"
  expect "a message over it is refused (65)" 65 sh -c 'notify send e2e.big "$(head -c 1001 /dev/zero | tr "\\0" x)" >/dev/null 2>&1; echo $?'
  check  "restore the default configuration" sh -c "sed -i '/^max-payload = 1000$/d' /etc/notifyd/notifyd.conf && systemctl reload notifyd"

  # The user units, for a user whose manager runs without a login (lingering).
  check  "loginctl enable-linger $TESTER" loginctl enable-linger $TESTER
  check  "the user's service manager starts" within 30 test -S /run/user/$TESTER_UID/systemd/private
fi

check  "the user enables notifyd.socket for themselves" as_tester_session systemctl --user enable --now notifyd.socket
expect "the user's notifyd.socket is active" active as_tester_session systemctl --user is-active notifyd.socket
check  "the user's notify reaches the user's own daemon" as_tester_session notify send e2e.mine "private, phase $E2E_PHASE"
expect "and reads it back" "private, phase $E2E_PHASE" as_tester_session notify latest e2e.mine
expect "the user's notifyd.service runs" active as_tester_session systemctl --user is-active notifyd.service
expect "the system daemon never saw it" 1 sh -c 'notify latest e2e.mine >/dev/null 2>&1; echo $?'
check  "the user's daemon keeps its state in ~/.local/state/notifyd" test -f /home/$TESTER/.local/state/notifyd/state.log

expect "no failed units" "" systemctl list-units --state=failed --plain --no-legend

if [ "$E2E_PHASE" = reboot ]; then
  check  "dpkg --purge notifyd" dpkg --purge notifyd
  expect "notifyd.socket stopped" inactive systemctl is-active notifyd.socket
  expect "notifyd.service stopped" inactive systemctl is-active notifyd.service
  check  "the units are gone" test ! -e /lib/systemd/system/notifyd.service -a ! -e /usr/lib/systemd/user/notifyd.socket
  check  "the binaries are gone" test ! -e /usr/sbin/notifyd -a ! -e /usr/bin/notify
  check  "the state directory is gone" test ! -e /var/lib/notifyd
  check  "the configuration is gone" test ! -e /etc/notifyd/notifyd.conf
  expect "no failed units after the purge" "" systemctl list-units --state=failed --plain --no-legend
fi
