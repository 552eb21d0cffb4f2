# The checks, run as root inside the booted guest after multi-user.target, once per phase ($E2E_PHASE is install or
# reboot). Helpers: checks.sh. Its last line marks the phase complete: the host fails a phase that did not get there.
SOCKET=/run/notifyd/notifyd.sock
TESTER=tester
TESTER_UID=1500
is() { [ "$(systemctl is-active "$1")" = "$2" ]; }
as_tester() { runuser -u $TESTER -- "$@"; }
as_tester_session() { runuser -u $TESTER -- env XDG_RUNTIME_DIR=/run/user/$TESTER_UID "$@"; }
journal() { journalctl --sync; journalctl -b --no-pager "$@"; }
# The time now, to the microsecond: `journal --since "$(journal_now)"` shows only what is logged from now on. (Not a
# cursor: with --after-cursor and a filter that the cursor's own entry does not match, journalctl 252 skips the
# first entry that does.)
journal_now() { journalctl --sync; date +@%s.%6N; }
# Whether notifyd logged "configuration reloaded" since $1. ExecReload= is `notifyd --reload`, which waits
# for the reload to be done: by the time `systemctl reload` returns, this must hold, with no waiting.
reloaded_since() { journal -u notifyd --since "$1" MESSAGE_ID=9543775093d846bba6aafcef3c2bd42d -o cat | grep -q 'configuration reloaded'; }
user_socket_active() { [ "$(as_tester_session systemctl --user is-active notifyd.socket)" = active ]; }
# The daemon's count of subscriptions, over all connections; more_subscriptions_than N: whether it is above N.
subscriptions() { notify stats --format json | sed -n 's/.*"subscriptions":\([0-9]*\).*/\1/p'; }
more_subscriptions_than() { [ "$(subscriptions)" -gt "$1" ]; }
# The /proc directories of every process named notifyd (the guest has no pgrep).
notifyd_processes() { for comm in /proc/[0-9]*/comm; do [ "$(cat "$comm" 2>/dev/null)" != notifyd ] || echo "${comm%/comm}"; done; }
# watchdog_holds SECONDS PID RESTARTS: watches notifyd.service until SECONDS have passed (a deadline: this waits for
# time to pass, polling the state meanwhile). Fails at once if it stops being active, changes its main pid or
# restarts; at the end, unless systemd recorded at least 3 watchdog pings (WatchdogTimestamp) in that time.
uptime_tenths() { awk '{ print int($1 * 10) }' /proc/uptime; }
watchdog_holds() {
  _end=$(($(uptime_tenths) + $1 * 10)); _pings=0
  _last=$(systemctl show -P WatchdogTimestampMonotonic notifyd.service)
  while [ "$(uptime_tenths)" -lt $_end ]; do
    is notifyd.service active || { echo "no longer active"; return 1; }
    [ "$(systemctl show -P MainPID notifyd.service)" = "$2" ] || { echo "another main pid"; return 1; }
    [ "$(systemctl show -P NRestarts notifyd.service)" = "$3" ] || { echo "restarted"; return 1; }
    _ping=$(systemctl show -P WatchdogTimestampMonotonic notifyd.service)
    [ "$_ping" = "$_last" ] || { _pings=$((_pings + 1)); _last=$_ping; }
    sleep 0.2
  done
  echo "$_pings pings"; [ $_pings -ge 3 ]
}
# How many times libdispatch complained that it could not renice a thread, this boot (the units make that quiet).
thread_priority_complaints() { journal -o cat | grep -c 'Failed to set thread priority'; }
# The options of the mount that covers /usr for process $1: the last mount on /usr in its mount namespace, else the
# one on / (ProtectSystem=strict makes the whole tree read-only, with no mount of /usr of its own).
usr_mount_options() { awk '$5=="/usr" {usr=$6} $5=="/" {root=$6} END {print (usr ? usr : root)}' "/proc/$1/mountinfo"; }

if [ "$E2E_PHASE" = install ]; then
  # README.md, "Run it as a service", as written (apt in place of sudo apt: the checks run as root).
  check  "apt install ./notifyd.deb installs the package" sh -c 'cd /e2e/in && apt install -y ./notifyd.deb'
  expect "postinst enabled notifyd.socket" enabled systemctl is-enabled notifyd.socket
  expect "postinst started notifyd.socket" active systemctl is-active notifyd.socket
  check  "systemctl enable --now notifyd.socket (the README's next step) is harmless" systemctl enable --now notifyd.socket
  check  "sysusers made the notifyd user" getent passwd notifyd
  for unit in notifyd.socket notifyd.service; do
    expect "systemd-analyze verify $unit: no complaints" "status 0" \
      sh -c "systemd-analyze verify --man=no /lib/systemd/system/$unit 2>&1; echo status \$?"
  done
  useradd --create-home --uid $TESTER_UID $TESTER
else
  expect "notifyd.socket active after the reboot" active systemctl is-active notifyd.socket
fi

expect "notifyd.service idle until the first client (socket activation)" inactive systemctl is-active notifyd.service

if [ "$E2E_PHASE" = install ]; then
  check  "notify send backup.status done, as an unprivileged user, reaches the system daemon" as_tester notify send backup.status done
  expect "notify latest backup.status prints done" done as_tester notify latest backup.status
  check  "a message to keep across the reboot" notify send e2e.persist "survives reboots"
else
  expect "the buffered message survived the reboot (state directory)" "survives reboots" notify latest e2e.persist
  expect_match "its sequence number survived too" '"seq":1,' notify latest e2e.persist --format json
fi

within 10 is notifyd.service active
expect "notifyd.service active after the first client" active systemctl is-active notifyd.service
expect "notifyd.service is Type=notify" notify systemctl show -P Type notifyd.service
expect_match "STATUS= reached systemd" '^[0-9]+ connections, [0-9]+ topics \([0-9]+ buffered\), [0-9]+ subscriptions, [0-9.]+ msg/s in' \
  systemctl show -P StatusText notifyd.service
expect_match "the watchdog is armed" '^30s$' systemctl show -P WatchdogUSec notifyd.service
expect "the memory the daemon may take is bounded (MemoryMax=3G)" 3221225472 systemctl show -P MemoryMax notifyd.service

# Who published: uid, pid and the systemd unit, from the kernel.
check  "a publish from a transient service" systemd-run --wait --quiet --unit e2e-publisher notify send e2e.unit from-a-unit
expect_match "deliveries carry the publisher's unit" '"unit":"e2e-publisher.service"' notify latest e2e.unit --format json
# A live delivery carries it too, not only the buffered message that `latest` reads.
before=$(subscriptions)
notify subscribe --format json --count 1 --timeout 20 e2e.live >/tmp/e2e-live.json 2>&1 &
subscriber=$!
check  "a live subscriber is subscribed" within 10 more_subscriptions_than "$before"
check  "a live publish from another transient service" \
  systemd-run --wait --quiet --unit e2e-live-publisher notify send --no-retain e2e.live live
wait $subscriber; status=$?
check  "notify subscribe --count 1 got it and exited" test $status -eq 0
expect_match "the live delivery carries the publisher's unit" '^\{"topic":"e2e.live",.*"unit":"e2e-live-publisher.service"' \
  cat /tmp/e2e-live.json

# The journal: lines, and structured fields.
expect_match "journalctl -u notifyd has the daemon's lines" 'notifyd [0-9]+\.[0-9]+\.[0-9]+ listening' journal -u notifyd -o cat
check  "clear a buffered message" sh -c 'notify send e2e.cleared x && notify clear e2e.cleared'
expect_match "journalctl -u notifyd TOPIC=… finds the structured entry" 'buffered message of e2e.cleared cleared' \
  journal -u notifyd TOPIC=e2e.cleared -o cat
expect_match "the entry has the peer's uid" '^PEER_UID=0$' journal -u notifyd TOPIC=e2e.cleared -o export
expect_match "the entry has the peer's pid" '^PEER_PID=[0-9]+$' journal -u notifyd TOPIC=e2e.cleared -o export
expect_match "the entry has the event's message id" '^MESSAGE_ID=de9f50bd8d0740a481d146722b8bdbac$' journal -u notifyd TOPIC=e2e.cleared -o export
expect_match "the entry has its priority (info)" '^PRIORITY=6$' journal -u notifyd TOPIC=e2e.cleared -o export
# notify clear ran in this test's own unit.
expect_match "the entry has the peer's unit" '^PEER_UNIT=notifyd-e2e.service$' journal -u notifyd TOPIC=e2e.cleared -o export
if [ "$E2E_PHASE" = install ]; then
  expect "the system socket is mode 0666, owned by notifyd" "666 notifyd notifyd" stat -c '%a %U %G' $SOCKET
  # Access rules from /etc/notifyd/notifyd.conf, applied by systemctl reload: a rule by systemd unit.
  cp /etc/notifyd/notifyd.conf /tmp/notifyd.conf.orig
  printf '[rules]\nfrom-unit = allow publish e2e.units.> unit:e2e-allowed.service\nothers = deny publish e2e.units.> everyone\n' \
    >> /etc/notifyd/notifyd.conf
  check  "systemctl reload notifyd with access rules" systemctl reload notifyd
  expect "a rule by unit refuses a peer outside the unit (77)" 77 sh -c 'notify send e2e.units.x y >/dev/null 2>&1; echo $?'
  check  "and admits a peer in the unit" systemd-run --wait --quiet --unit e2e-allowed notify send e2e.units.x from-unit
  expect "the unit's message is the buffered one" from-unit notify latest e2e.units.x
  expect_match "notify explain names the deciding rule" \
    '^publish: denied for uid 0, by rule others \(line [0-9]+\): deny publish e2e.units.> everyone$' notify explain e2e.units.x
  cp /tmp/notifyd.conf.orig /etc/notifyd/notifyd.conf
  check  "systemctl reload notifyd without them" systemctl reload notifyd
  check  "they are gone as soon as it returns" notify send e2e.units.probe x
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
# At most the figure docs/service.md states, read from the page the package installs.
readme_exposure=$(zcat /usr/share/doc/notifyd/docs/service.md.gz | sed -n 's/.*rates it \*\*\([0-9.]*\) SAFE\*\*.*/\1/p' | head -n 1)
check  "the installed docs/service.md states the exposure (${readme_exposure:-none found})" test -n "$readme_exposure"
check  "systemd-analyze security: exposure ${exposure:-unknown}, at most docs/service.md's $readme_exposure" \
  awk -v e="${exposure:-99}" -v most="${readme_exposure:-0}" 'BEGIN { exit !(e + 0 <= most + 0) }'

pid=$(systemctl show -P MainPID notifyd.service)
check  "the main pid is known" test "${pid:-0}" -gt 0
expect "it is the daemon" notifyd cat /proc/$pid/comm
expect "kernel: no new privileges" 1 awk '/^NoNewPrivs:/ {print $2}' /proc/$pid/status
expect "kernel: seccomp filter active" 2 awk '/^Seccomp:/ {print $2}' /proc/$pid/status
expect "kernel: runs as the notifyd user" "$(id -u notifyd)" awk '/^Uid:/ {print $2}' /proc/$pid/status
own_net=$(readlink /proc/$pid/ns/net); init_net=$(readlink /proc/1/ns/net)
check  "kernel: its own network namespace ($own_net, not $init_net)" test -n "$own_net" -a -n "$init_net" -a "$own_net" != "$init_net"
expect_match "kernel: /usr is read-only for it" '^ro(,|$)' usr_mount_options "$pid"
expect_match "and writable outside its sandbox (the check tells them apart)" '^rw(,|$)' usr_mount_options self
check  "the daemon still works under all of it" sh -c 'notify send e2e.hardened ok && test "$(notify latest e2e.hardened)" = ok'

if [ "$E2E_PHASE" = install ]; then
  # systemctl reload: a new limit applies to new connections, in the same process.
  pid_before=$pid
  restarts_before=$(systemctl show -P NRestarts notifyd.service)
  printf 'max-payload = 1000\n' >>/etc/notifyd/notifyd.conf
  # Only entries from this point on count: the reloads above logged the same line.
  since=$(journal_now)
  check  "systemctl reload notifyd" systemctl reload notifyd
  check  "the reload is done and logged by the time systemctl reload returns" reloaded_since "$since"
  expect "still active after the reload" active systemctl is-active notifyd.service
  expect "same process" "$pid_before" systemctl show -P MainPID notifyd.service
  expect "not restarted" "$restarts_before" systemctl show -P NRestarts notifyd.service
  expect_match "new connections get the new limit" 'max_payload=1000 ' sh -c "socat -t 1 - UNIX-CONNECT:$SOCKET </dev/null | head -n 1"
  expect "a message over it is refused (65)" 65 sh -c 'notify send e2e.big "$(head -c 1001 /dev/zero | tr "\\0" x)" >/dev/null 2>&1; echo $?'
  since=$(journal_now)
  check  "restore the default configuration" sh -c "sed -i '/^max-payload = 1000$/d' /etc/notifyd/notifyd.conf && systemctl reload notifyd"
  check  "it is applied" reloaded_since "$since"

  # A file that cannot be used: systemctl reload fails and says so; the daemon runs on with what it had.
  printf 'max-payload = lots\n' >>/etc/notifyd/notifyd.conf
  since=$(journal_now)
  check  "systemctl reload notifyd with an unusable file fails" sh -c '! systemctl reload notifyd 2>/dev/null'
  expect_match "the journal says why" 'configuration not reloaded, the previous one stays in force' \
    journal -u notifyd --since "$since" -o cat
  expect "still active, in the same process" "active $pid_before" sh -c 'echo "$(systemctl is-active notifyd.service) $(systemctl show -P MainPID notifyd.service)"'
  expect_match "the running configuration stays in force" 'max_payload=1048576 ' sh -c "socat -t 1 - UNIX-CONNECT:$SOCKET </dev/null | head -n 1"
  check  "restore the default configuration" sh -c "sed -i '/^max-payload = lots$/d' /etc/notifyd/notifyd.conf && systemctl reload notifyd"

  # A subscriber that stops reading: once its socket and the pipe behind it are full, the daemon queues for it up to
  # its limits, then drops the oldest (overflow=drop-oldest) and logs that with DROPPED=, once per batch. Small
  # limits make that take a few megabytes. socat subscribes and writes what it gets to a pipe that nobody reads.
  printf 'max-queued-messages = 10\nmax-queued-bytes = 65536\n' >>/etc/notifyd/notifyd.conf
  since=$(journal_now)
  check  "systemctl reload notifyd with small queue limits" systemctl reload notifyd
  check  "they are applied" reloaded_since "$since"
  before=$(subscriptions)
  check  "a subscriber that never reads, in e2e-stalled.service" systemd-run --quiet --unit e2e-stalled \
    sh -c "(printf 'SUB e2e.drop.> overflow=drop-oldest\n'; exec sleep 600) | socat - UNIX-CONNECT:$SOCKET | sleep 600"
  check  "it is subscribed" within 10 more_subscriptions_than "$before"
  check  "3 MB published past it" \
    sh -c 'yes "$(head -c 1000 /dev/zero | tr "\0" x)" 2>/dev/null | head -n 3000 | notify send --no-retain --lines e2e.drop.x'
  drops() { journal -u notifyd --since "$since" MESSAGE_ID=5bf29b1c6aa4439fb5db50a6d4c6027d -o export; }
  drops_logged() { drops | grep -q '^DROPPED='; }
  check  "the drops are logged" within 10 drops_logged
  expect_match "the entry has the count, DROPPED=" '^DROPPED=[1-9][0-9]*$' drops
  expect_match "the entry has the subscriber's unit" '^PEER_UNIT=e2e-stalled.service$' drops
  expect_match "the entry has its priority (notice)" '^PRIORITY=5$' drops
  count=$(drops | sed -n 's/^DROPPED=//p' | head -n 1)
  expect_match "journalctl -u notifyd DROPPED=$count finds it" "^dropped $count messages for a subscriber that fell behind" \
    journal -u notifyd DROPPED="$count" -o cat
  check  "stop the subscriber" systemctl stop e2e-stalled
  since=$(journal_now)
  check  "restore the default configuration" sh -c "sed -i '/^max-queued-/d' /etc/notifyd/notifyd.conf && systemctl reload notifyd"
  check  "it is applied" reloaded_since "$since"

  # The watchdog pings, not only its setting: with WatchdogSec=2s (a runtime drop-in), systemd would kill a daemon
  # that stopped pinging after 2 s; it must outlive three times that, in the same process.
  mkdir -p /run/systemd/system/notifyd.service.d
  printf '[Service]\nWatchdogSec=2s\n' >/run/systemd/system/notifyd.service.d/e2e-watchdog.conf
  systemctl daemon-reload
  check  "restart notifyd with WatchdogSec=2s" systemctl restart notifyd.service
  expect "the watchdog is 2s" 2s systemctl show -P WatchdogUSec notifyd.service
  pid=$(systemctl show -P MainPID notifyd.service)
  check  "its pings keep it alive for 7 s: active, same pid, not restarted, pings seen" \
    watchdog_holds 7 "$pid" "$(systemctl show -P NRestarts notifyd.service)"
  rm /run/systemd/system/notifyd.service.d/e2e-watchdog.conf
  systemctl daemon-reload
  check  "restart notifyd with its own watchdog" systemctl restart notifyd.service
  expect "the watchdog is 30s again" 30s systemctl show -P WatchdogUSec notifyd.service

  # A restart costs a subscriber nothing (issue 16): with history on, `notify subscribe` rides out
  # `systemctl restart notifyd` while messages are published, and prints each once, in order.
  printf 'history-messages = 1000\n' >>/etc/notifyd/notifyd.conf
  since=$(journal_now)
  check  "systemctl reload notifyd with history on (history-messages = 1000)" systemctl reload notifyd
  check  "it is applied" reloaded_since "$since"
  before=$(subscriptions)
  notify subscribe e2e.restart --since 0 >/tmp/e2e-restart.out 2>/tmp/e2e-restart.err &
  subscriber=$!
  check  "a subscriber is subscribed" within 10 more_subscriptions_than "$before"
  check  "20 messages published, each acknowledged" sh -c 'for i in $(seq 1 20); do notify send --no-retain e2e.restart m$i || exit 1; done'
  check  "systemctl restart notifyd.service" systemctl restart notifyd.service
  check  "20 more after the restart" sh -c 'for i in $(seq 21 40); do notify send --no-retain e2e.restart m$i || exit 1; done'
  check  "the subscriber reconnected and printed all 40" within 30 grep -qx 'e2e.restart m40' /tmp/e2e-restart.out
  expect "each once, in order" "$(seq 1 40 | sed 's/^/e2e.restart m/')" cat /tmp/e2e-restart.out
  expect_match "it said it reconnected, on stderr" 'reconnected' cat /tmp/e2e-restart.err
  kill $subscriber 2>/dev/null; wait $subscriber 2>/dev/null
  # While the service is down, the socket (systemd's) takes connections: a publish waits in its backlog until
  # socket activation has started the daemon again, and succeeds.
  check  "systemctl stop notifyd.service" systemctl stop notifyd.service
  expect "the service is down, its socket listening" "inactive active" sh -c 'echo "$(systemctl is-active notifyd.service) $(systemctl is-active notifyd.socket)"'
  check  "notify send while it is down succeeds (the backlog held it)" notify send --no-retain e2e.restart m41
  expect "and it is in the history" "m41" notify history e2e.restart --count 1 --format raw
  since=$(journal_now)
  check  "restore the default configuration" sh -c "sed -i '/^history-messages = 1000$/d' /etc/notifyd/notifyd.conf && systemctl reload notifyd"
  check  "it is applied" reloaded_since "$since"

  # The user units, for a user whose manager runs without a login (lingering).
  check  "loginctl enable-linger $TESTER" loginctl enable-linger $TESTER
  check  "the user's service manager starts" within 30 test -S /run/user/$TESTER_UID/systemd/private
  # The user units as that user's manager reads them (%t is the user's runtime directory, not /run).
  for unit in notifyd.socket notifyd.service; do
    expect "systemd-analyze --user verify the user's $unit, as $TESTER: no complaints" "status 0" \
      as_tester_session sh -c "systemd-analyze --user verify --man=no /usr/lib/systemd/user/$unit 2>&1; echo status \$?"
  done
fi

# The HTTP gateway (docs/http.md): off until enabled; then on loopback, as its own user, with the token it made at its
# first start. socat stands in for curl.
http_request() { printf "$1" | socat -t 5 - TCP:127.0.0.1:8080; }
http_token() { awk '/^read-write /{print $2}' /var/lib/notifyd-http/token; }
if [ "$E2E_PHASE" = install ]; then
  expect "notifyd-http.socket is not enabled by the package" disabled systemctl is-enabled notifyd-http.socket
  for unit in notifyd-http.socket notifyd-http.service; do
    expect "systemd-analyze verify $unit: no complaints" "status 0" \
      sh -c "systemd-analyze verify --man=no /lib/systemd/system/$unit 2>&1; echo status \$?"
  done
  check  "sysusers made the notifyd-http user" getent passwd notifyd-http
  check  "systemctl enable --now notifyd-http.socket (docs/http.md)" systemctl enable --now notifyd-http.socket
else
  expect "notifyd-http.socket active after the reboot (enabled)" active systemctl is-active notifyd-http.socket
fi
expect "notifyd-http.service idle until the first request (socket activation)" inactive systemctl is-active notifyd-http.service
check  "notifyd-http answers on 127.0.0.1:8080, 401 without a token (loopback is not anonymous)" within 10 sh -c 'printf "GET /e2e.none/latest HTTP/1.0\r\n\r\n" | socat -t 5 - TCP:127.0.0.1:8080 | grep -q "^HTTP/1.[01] 401"'
expect "it made its token at its first start: /var/lib/notifyd-http/token, 0600, its own" "600 notifyd-http" \
  stat -c "%a %U" /var/lib/notifyd-http/token
expect_match "with the token, GET /e2e.none/latest is a 404" '^HTTP/1.[01] 404' \
  http_request "GET /e2e.none/latest HTTP/1.0\r\nAuthorization: Bearer $(http_token)\r\n\r\n"
expect_match "a Host that is not the gateway's is refused (DNS rebinding)" '^HTTP/1.[01] 403' \
  http_request "GET /e2e.none/latest HTTP/1.1\r\nHost: rebound.example:8080\r\nAuthorization: Bearer $(http_token)\r\nConnection: close\r\n\r\n"
expect_match "an HTTP publish is answered 200 with the message" '"message":"hello, http"' \
  http_request "POST /e2e.http HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer $(http_token)\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello, http"
expect "notify latest e2e.http sees it" "hello, http" notify latest e2e.http
expect "published as the gateway's own user" "$(id -u notifyd-http)" \
  sh -c 'notify latest e2e.http --format json | sed -n "s/.*\"uid\":\([0-9]*\).*/\1/p"'
expect_match "GET /e2e.http/latest answers it" '"seq":' http_request "GET /e2e.http/latest HTTP/1.0\r\nAuthorization: Bearer $(http_token)\r\n\r\n"
expect "notifyd-http.service runs as notifyd-http" notifyd-http systemctl show -P User notifyd-http.service
expect "and was started by its socket" active systemctl is-active notifyd-http.service

# The fleet service (docs/federation.md): off until enabled; as its own user, the only uid the daemon lets follow the
# host's publishes. No NATS server here: it links to the daemon and keeps trying the server, local traffic untouched.
if [ "$E2E_PHASE" = install ]; then
  expect "notifyd-fleet.service is not enabled by the package" disabled systemctl is-enabled notifyd-fleet.service
  expect "systemd-analyze verify notifyd-fleet.service: no complaints" "status 0" \
    sh -c "systemd-analyze verify --man=no /lib/systemd/system/notifyd-fleet.service 2>&1; echo status \$?"
  check  "sysusers made the notifyd-fleet user" getent passwd notifyd-fleet
  check  "name a NATS server under [nats]" sh -c 'printf "[nats]\nservers = nats://127.0.0.1:4222\nhost-name = e2e\n" >>/etc/notifyd/notifyd.conf'
  check  "systemctl start notifyd-fleet.service" systemctl start notifyd-fleet.service
  expect "notifyd-fleet.service runs as notifyd-fleet" notifyd-fleet systemctl show -P User notifyd-fleet.service
  check  "the daemon lets it follow (fleet_linked 1 in notify stats)" within 10 sh -c '[ "$(notify stats | awk "\$1 == \"fleet_linked\" { print \$2 }")" = 1 ]'
  check  "its counters reach notify stats (nats_connected 0: no server here)" within 10 sh -c '[ "$(notify stats | awk "\$1 == \"nats_connected\" { print \$2 }")" = 0 ]'
  check  "its journal events carry their MESSAGE_ID (no libsystemd in it)" \
    sh -c 'journalctl -q -u notifyd-fleet.service MESSAGE_ID=11dc245d1c9a43e1ba75a3e5b921fcec | grep -q "following the daemon"'
  check  "systemctl reload notifyd-fleet.service (ExecReload=: SIGHUP, no procps needed)" systemctl reload notifyd-fleet.service
  check  "it read its settings again" within 10 sh -c 'journalctl -q -u notifyd-fleet.service MESSAGE_ID=d18f784170b544cfa7ccd5e68c061b8d | grep -q "configuration reloaded"'
  check  "local publish and subscribe go on" sh -c 'notify send e2e.fleet local && [ "$(notify latest e2e.fleet)" = local ]'
  check  "notifyd.service is still off the network" sh -c 'systemctl show -P IPAddressDeny notifyd.service | grep -q .'
  check  "systemctl stop notifyd-fleet.service" systemctl stop notifyd-fleet.service
  check  "the daemon sees it gone (fleet_linked 0)" within 10 sh -c '[ "$(notify stats | awk "\$1 == \"fleet_linked\" { print \$2 }")" = 0 ]'
  check  "take [nats] out again" sh -c "sed -i '/^\[nats\]$/,\$d' /etc/notifyd/notifyd.conf"
else
  expect "notifyd-fleet.service stays off after the reboot (never enabled)" inactive systemctl is-active notifyd-fleet.service
fi

if [ "$E2E_PHASE" = reboot ]; then
  # Lingering survives the reboot: the user's manager, and the socket enabled in the install phase, start at boot.
  check  "after the reboot, the lingering user's manager runs" within 30 test -S /run/user/$TESTER_UID/systemd/private
  check  "and has started the user's notifyd.socket, before anyone asks" within 30 user_socket_active
fi
check  "the user enables notifyd.socket for themselves" as_tester_session systemctl --user enable --now notifyd.socket
expect "the user's notifyd.socket is active" active as_tester_session systemctl --user is-active notifyd.socket
check  "the user's notify reaches the user's own daemon" as_tester_session notify send e2e.mine "private, phase $E2E_PHASE"
expect "and reads it back" "private, phase $E2E_PHASE" as_tester_session notify latest e2e.mine
expect "the user's notifyd.service runs" active as_tester_session systemctl --user is-active notifyd.service
expect "the system daemon never saw it" 1 sh -c 'notify latest e2e.mine >/dev/null 2>&1; echo $?'
check  "the user's daemon keeps its state in ~/.local/state/notifyd" test -f /home/$TESTER/.local/state/notifyd/state.log

expect "no failed units" "" systemctl list-units --state=failed --plain --no-legend
expect "no 'Failed to set thread priority' in the journal, from the system's notifyd or the user's" 0 thread_priority_complaints

if [ "$E2E_PHASE" = reboot ]; then
  check  "dpkg --purge notifyd" dpkg --purge notifyd
  expect "notifyd.socket stopped" inactive systemctl is-active notifyd.socket
  expect "notifyd.service stopped" inactive systemctl is-active notifyd.service
  expect "notifyd-http.service stopped" inactive systemctl is-active notifyd-http.service
  expect "notifyd-http.socket stopped" inactive systemctl is-active notifyd-http.socket
  expect "the user's notifyd.socket stopped too" inactive as_tester_session systemctl --user is-active notifyd.socket
  expect "no notifyd runs any more, the user's included" "" notifyd_processes
  check  "the units are gone" test ! -e /lib/systemd/system/notifyd.service -a ! -e /usr/lib/systemd/user/notifyd.socket
  check  "the binaries are gone" test ! -e /usr/sbin/notifyd -a ! -e /usr/bin/notify -a ! -e /usr/sbin/notifyd-http
  check  "the gateway's units are gone" test ! -e /lib/systemd/system/notifyd-http.service -a ! -e /lib/systemd/system/notifyd-http.socket
  check  "the fleet service and its unit are gone" test ! -e /lib/systemd/system/notifyd-fleet.service -a ! -e /usr/sbin/notifyd-fleet
  check  "the state directory is gone" test ! -e /var/lib/notifyd
  check  "the configuration is gone" test ! -e /etc/notifyd/notifyd.conf
  expect "no failed units after the purge" "" systemctl list-units --state=failed --plain --no-legend
fi

# The very last action: without it, the host counts the phase as failed (this script died before its end).
echo "phase $E2E_PHASE complete" >"$E2E_COMPLETE"
