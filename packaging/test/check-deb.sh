#!/usr/bin/env bash
# Checks that a notifyd .deb holds what it should: the four binaries (static Swift runtime, stripped, runnable, linked
# as packaging/linker/flags.sh says), the system and user units, the sysusers entry, the configuration as a
# conffile, man pages that render, completions of both commands for three shells, docs, and the maintainer scripts.
# Prints one line per check; exits 1 if any failed.
set -uo pipefail
deb=${1:?usage: $0 path/to/notifyd.deb}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
dpkg-deb -e "$deb" "$root/DEBIAN"
failed=0
ok() { printf 'PASS: %s\n' "$1"; }
bad() { printf 'FAIL: %s\n' "$1"; failed=1; }
check() { local what=$1; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi; }

for path in usr/sbin/notifyd usr/bin/notify usr/sbin/notifyd-http usr/sbin/notifyd-fleet; do
  check "$path is executable" test -x "$root/$path"
  check "$path needs no shared Swift runtime" sh -c "! ldd '$root/$path' | grep -q libswift"
  check "$path is stripped" sh -c "file '$root/$path' | grep -q 'stripped' && ! file '$root/$path' | grep -q 'not stripped'"
done
check "notify is linked fully static (no dynamic loader at each call)" sh -c "file '$root/usr/bin/notify' | grep -q 'statically linked'"
# How notifyd is linked to touch few pages at start (packaging/linker/flags.sh): a regression there costs MiB of RSS.
# (Each reads the tool's output first, so that a tool that fails fails the check.)
check "notifyd exports no symbols" sh -c "symbols=\$(nm -D --defined-only '$root/usr/sbin/notifyd') && [ -z \"\$symbols\" ]"
check "notifyd packs its relative relocations (DT_RELR)" sh -c "dynamic=\$(readelf -d '$root/usr/sbin/notifyd') && echo \"\$dynamic\" | grep -q '(RELR)'"
check "notifyd has libstdc++ linked in, not shared" sh -c "dynamic=\$(readelf -d '$root/usr/sbin/notifyd') && echo \"\$dynamic\" | grep -q NEEDED && ! echo \"\$dynamic\" | grep -q 'libstdc++'"
check "the package asks for glibc 2.36 or later, which DT_RELR needs" sh -c "glibc=\$(dpkg-deb -f '$deb' Depends | sed -n 's/.*libc6 (>= \\([0-9.]*\\)).*/\\1/p') && dpkg --compare-versions \"\$glibc\" ge 2.36"
check "notify --version answers" sh -c "'$root/usr/bin/notify' --version | grep -qx '$(dpkg-deb -f "$deb" Version)'"
check "notifyd --help answers" sh -c "'$root/usr/sbin/notifyd' --help | grep -q 'notification center'"
check "notifyd-http --help answers" sh -c "'$root/usr/sbin/notifyd-http' --help | grep -q 'ntfy'"
check "notifyd-fleet --help answers" sh -c "'$root/usr/sbin/notifyd-fleet' --help | grep -q 'through NATS'"
# The daemon holds every local user's messages: no TLS library and no NATS code in it (issue 47); the fleet service
# has both. (Strings of BoringSSL's and of the NATS client's own, which a build that links them keeps.)
# (grep reads strings' output itself: dash's echo would act on a backslash sequence in the text, \c ending it.)
check "notifyd links no TLS and no NATS code" sh -c "! strings -a '$root/usr/sbin/notifyd' | grep -q -e 'BoringSSL' -e 'NATSConnection' -e 'NATS/1.0'"
check "notifyd-fleet has them (the check above can see them)" sh -c "strings -a '$root/usr/sbin/notifyd-fleet' | grep -q 'NATS/1.0' && strings -a '$root/usr/sbin/notifyd-fleet' | grep -q 'BoringSSL'"
for path in lib/systemd/system/notifyd.socket lib/systemd/system/notifyd.service lib/systemd/system/notifyd-http.service \
            lib/systemd/system/notifyd-http.socket lib/systemd/system/notifyd-fleet.service \
            usr/lib/systemd/user/notifyd.socket usr/lib/systemd/user/notifyd.service \
            usr/lib/sysusers.d/notifyd.conf etc/notifyd/notifyd.conf \
            usr/share/doc/notifyd/copyright usr/share/doc/notifyd/changelog.gz \
            usr/share/doc/notifyd/README.md.gz usr/share/doc/notifyd/PROTOCOL.md.gz \
            usr/share/doc/notifyd/docs/service.md.gz usr/share/doc/notifyd/docs/guarantees.md.gz \
            usr/share/doc/notifyd/docs/http.md.gz usr/share/doc/notifyd/docs/http-page.png; do
  check "$path is there" test -s "$root/$path"
done
check "the gateway's socket is 127.0.0.1:8080, loopback only" grep -qx 'ListenStream=127.0.0.1:8080' "$root/lib/systemd/system/notifyd-http.socket"
check "the gateway may hold its connections and its streams' daemon connections (LimitNOFILE=8192)" grep -qx 'LimitNOFILE=8192' "$root/lib/systemd/system/notifyd-http.service"
check "the gateway keeps its own token in a state directory of its own" grep -qx 'StateDirectory=notifyd-http' "$root/lib/systemd/system/notifyd-http.service"
check "the daemon's unit keeps it off the network (IPAddressDeny=any, Unix sockets only)" sh -c "grep -qx 'IPAddressDeny=any' '$root/lib/systemd/system/notifyd.service' && grep -qx 'RestrictAddressFamilies=AF_UNIX' '$root/lib/systemd/system/notifyd.service'"
check "the fleet service runs as its own user, with the network" sh -c "grep -qx 'User=notifyd-fleet' '$root/lib/systemd/system/notifyd-fleet.service' && grep -qx 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' '$root/lib/systemd/system/notifyd-fleet.service'"
check "no drop-in to put the daemon on the network is shipped any more" test ! -e "$root/usr/share/doc/notifyd/examples/nats-network.conf"
check "the system socket is /run/notifyd/notifyd.sock" grep -qx 'ListenStream=/run/notifyd/notifyd.sock' "$root/lib/systemd/system/notifyd.socket"
check "the user socket is in the user's runtime directory" grep -qx 'ListenStream=%t/notifyd/notifyd.sock' "$root/usr/lib/systemd/user/notifyd.socket"
check "the system socket is mode 0666, the notifyd group's" sh -c "grep -qx 'SocketMode=0666' '$root/lib/systemd/system/notifyd.socket' && grep -qx 'SocketGroup=notifyd' '$root/lib/systemd/system/notifyd.socket'"
check "the user socket is mode 0600" grep -qx 'SocketMode=0600' "$root/usr/lib/systemd/user/notifyd.socket"
check "the configuration is a conffile" grep -qx '/etc/notifyd/notifyd.conf' "$root/DEBIAN/conffiles"
for page in usr/share/man/man1/notify.1.gz usr/share/man/man8/notifyd.8.gz usr/share/man/man8/notifyd-http.8.gz usr/share/man/man8/notifyd-fleet.8.gz; do
  check "$page is there" test -s "$root/$page"
  check "$page renders without warnings" sh -c "zcat '$root/$page' | groff -mandoc -Tutf8 -ww -z 2>&1 | grep -q . && exit 1 || exit 0"
done
check "notify(1) documents the subcommands and exit statuses" sh -c "zcat '$root/usr/share/man/man1/notify.1.gz' | grep -q 'subscribe' && zcat '$root/usr/share/man/man1/notify.1.gz' | grep -q '124'"
# Completions of both commands: each there, not empty, and for its command.
for name in notify notifyd notifyd-http notifyd-fleet; do
  for path in usr/share/bash-completion/completions/$name usr/share/zsh/vendor-completions/_$name \
              usr/share/fish/vendor_completions.d/$name.fish; do
    check "$path is there, not empty" test -s "$root/$path"
  done
  check "bash completion completes $name" grep -Eq "^complete .* $name\$" "$root/usr/share/bash-completion/completions/$name"
  check "zsh completion completes $name" grep -q "^#compdef $name\$" "$root/usr/share/zsh/vendor-completions/_$name"
  check "fish completion completes $name" grep -Eq "complete -c '?$name'? " "$root/usr/share/fish/vendor_completions.d/$name.fish"
done
check "bash completion of notifyd offers its options" grep -q -- '--max-payload' "$root/usr/share/bash-completion/completions/notifyd"
check "notifyd(8) has no subcommand, since notifyd takes none" sh -c "! zcat '$root/usr/share/man/man8/notifyd.8.gz' | grep -q -i 'subcommand'"
check "notifyd(8) documents its options" sh -c "zcat '$root/usr/share/man/man8/notifyd.8.gz' | grep -q 'max-queued-bytes'"
check "notifyd-http(8) documents its options, and no subcommand" sh -c "zcat '$root/usr/share/man/man8/notifyd-http.8.gz' | grep -q 'token-file' && ! zcat '$root/usr/share/man/man8/notifyd-http.8.gz' | grep -q -i 'subcommand'"
check "the sysusers entry makes the gateway's user" grep -q '^u notifyd-http ' "$root/usr/lib/sysusers.d/notifyd.conf"
check "the sysusers entry makes the fleet service's user" grep -q '^u notifyd-fleet ' "$root/usr/lib/sysusers.d/notifyd.conf"
check "notifyd-fleet(8) documents its options" sh -c "zcat '$root/usr/share/man/man8/notifyd-fleet.8.gz' | grep -q 'nats-catch-up'"
for script in postinst prerm postrm; do
  check "$script is there" test -x "$root/DEBIAN/$script"
done
# No libsystemd: the daemon speaks systemd's protocols itself (docs/performance.md, idle RSS).
check "notifyd links no libsystemd" sh -c "! readelf -d '$root/usr/sbin/notifyd' | grep -q libsystemd"
check "md5sums match the files" sh -c "cd '$root' && md5sum --quiet -c DEBIAN/md5sums"
exit $failed
