#!/usr/bin/env bash
# Builds the notifyd .deb: the binaries linked with the static Swift standard library and stripped, the system and
# user units, the sysusers entry, the default configuration, man pages and shell completions generated from the
# argument parser definitions, and the docs. Writes it to .build/deb/ and prints its absolute path as the last line.
#
#   packaging/build-deb.sh
#
# Needs: the Swift toolchain (with its ld.lld, and libstdc++-12-dev, which Swift's own list of Debian packages
# has), dpkg-dev (dpkg-shlibdeps).
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/NotifyProtocol/Host/NotifydRelease.swift)
arch=$(dpkg --print-architecture)
scratch=.build-deb
out=.build/deb
stage=$out/notifyd_${version}_${arch}
deb=$out/notifyd_${version}_${arch}.deb
say() { printf 'build-deb: %s\n' "$*" >&2; }

command -v dpkg-shlibdeps >/dev/null || {
  say "installing dpkg-dev (dpkg-shlibdeps)"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  # A machine whose package lists were never fetched knows no dpkg-dev yet: fetch them, then try again.
  $sudo apt-get install -y -qq dpkg-dev >/dev/null 2>&1 || {
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq dpkg-dev >/dev/null
  }
}

say "building $version for $arch (release, static Swift standard library; notify fully static)"
# The flags, and why: packaging/linker/flags.sh.
source packaging/linker/flags.sh
packaged_build_flags "$scratch"
bin=$(swift build "${daemon_build[@]}" --show-bin-path)
# SwiftPM does not know that the linker reads the order files: link again every time (seconds), so that a new order
# is used.
rm -f "$bin/notifyd" "$bin/notifyd-http" "$bin/notifyd-fleet" "$bin/notify" "$bin/notify-static"
began=$SECONDS
swift build "${daemon_build[@]}" --product notifyd >&2
say "notifyd built in $((SECONDS - began)) s"; began=$SECONDS
# The HTTP gateway, linked as the daemon is, in the order of its own start-up and first requests.
swift build "${gateway_build[@]}" --product notifyd-http >&2
say "notifyd-http built in $((SECONDS - began)) s"; began=$SECONDS
# The fleet service, likewise: the only binary of the package with NATS and TLS in it.
swift build "${daemon_build[@]}" --product notifyd-fleet >&2
say "notifyd-fleet built in $((SECONDS - began)) s"; began=$SECONDS
# notify: its modules beside the daemon's, then linked fully static (flags.sh says why this way).
swift build "${cli_build[@]}" --product notify >&2
if ! link_static_notify "$bin" "$bin/notify-static" >"$scratch/notify-link.log" 2>&1; then
  cat "$scratch/notify-link.log" >&2
  exit 1
fi
say "notify built in $((SECONDS - began)) s"
# glibc's linker notes about NSS functions and mktemp in static binaries are expected; show the rest.
grep -v "statically linked applications requires at runtime\|use of .mktemp. is dangerous" "$scratch/notify-link.log" >&2 || true
if ldd "$bin/notify-static" >/dev/null 2>&1; then
  say "error: $bin/notify-static is not fully static"
  exit 1
fi

# How much of each start-up order the code still has: an order goes stale as functions are renamed, and costs
# start-up memory (never correctness) until packaging/linker/order-startup.sh writes it again.
for name in notifyd notifyd-http notify; do
  binary=$bin/$name
  [ "$name" = notify ] && binary=$bin/notify-static
  order=packaging/linker/$name.order
  found=$(nm --defined-only "$binary" | awk '{ print $NF }' | sort -u | comm -12 - <(sort -u "$order") | wc -l)
  say "$name: $found of the $(wc -l <"$order") functions in $order are in the build"
done

rm -rf "$stage" && mkdir -p "$stage"
install -D -m 0755 "$bin/notifyd" "$stage/usr/sbin/notifyd"
install -D -m 0755 "$bin/notify-static" "$stage/usr/bin/notify"
install -D -m 0755 "$bin/notifyd-http" "$stage/usr/sbin/notifyd-http"
install -D -m 0755 "$bin/notifyd-fleet" "$stage/usr/sbin/notifyd-fleet"
strip --strip-unneeded "$stage/usr/sbin/notifyd" "$stage/usr/bin/notify" "$stage/usr/sbin/notifyd-http" "$stage/usr/sbin/notifyd-fleet"
for binary in "$stage/usr/sbin/notifyd" "$stage/usr/bin/notify" "$stage/usr/sbin/notifyd-http" "$stage/usr/sbin/notifyd-fleet"; do
  if ldd "$binary" 2>&1 | grep -q libswift; then
    say "error: $binary needs the Swift runtime as a shared library; it must be linked with --static-swift-stdlib"
    exit 1
  fi
done

# Units: Debian 12 keeps system units in /lib (its merged /usr makes that /usr/lib too).
install -D -m 0644 packaging/systemd/system/notifyd.socket "$stage/lib/systemd/system/notifyd.socket"
install -D -m 0644 packaging/systemd/system/notifyd.service "$stage/lib/systemd/system/notifyd.service"
install -D -m 0644 packaging/systemd/system/notifyd-http.service "$stage/lib/systemd/system/notifyd-http.service"
install -D -m 0644 packaging/systemd/system/notifyd-http.socket "$stage/lib/systemd/system/notifyd-http.socket"
install -D -m 0644 packaging/systemd/system/notifyd-fleet.service "$stage/lib/systemd/system/notifyd-fleet.service"
install -D -m 0644 packaging/systemd/user/notifyd.socket "$stage/usr/lib/systemd/user/notifyd.socket"
install -D -m 0644 packaging/systemd/user/notifyd.service "$stage/usr/lib/systemd/user/notifyd.service"
install -D -m 0644 packaging/notifyd.sysusers "$stage/usr/lib/sysusers.d/notifyd.conf"
install -D -m 0644 packaging/notifyd.conf "$stage/etc/notifyd/notifyd.conf"
install -D -m 0644 packaging/debian/lintian-overrides "$stage/usr/share/lintian/overrides/notifyd"

# Man pages, from the same definitions as --help: notify(1) and notifyd(8). The plugin builds the products its own
# way (debug, shared Swift runtime), so it works in the ordinary build directory, never in $scratch. One run writes
# every page in section 8 (each run takes some 10 s); notify's page differs from its section 1 form only in `.Dt`.
date=$(git log -1 --format=%cs 2>/dev/null || date +%F)
swift package plugin generate-manual --configuration debug --section 8 --date "$date" --authors "the notifyd maintainers" >&2
manuals=.build/plugins/GenerateManual/outputs
mkdir -p "$stage/usr/share/man/man1"
sed '/^\.Dt NOTIFY 8$/s/8$/1/' "$manuals/notify-cli/notify.8" >"$stage/usr/share/man/man1/notify.1"
grep -qx '.Dt NOTIFY 1' "$stage/usr/share/man/man1/notify.1" || { say "error: notify.8 has no '.Dt NOTIFY 8' line to make section 1"; exit 1; }
install -D -m 0644 "$manuals/notifyd/notifyd.8" "$stage/usr/share/man/man8/notifyd.8"
install -D -m 0644 "$manuals/notifyd-http/notifyd-http.8" "$stage/usr/share/man/man8/notifyd-http.8"
install -D -m 0644 "$manuals/notifyd-fleet/notifyd-fleet.8" "$stage/usr/share/man/man8/notifyd-fleet.8"
chmod 0644 "$stage/usr/share/man/man1/notify.1"
# Blank lines from paragraphs in the help text are not mdoc: make them paragraph breaks.
sed -i 's/^$/.Pp/' "$stage/usr/share/man/man1/notify.1" "$stage/usr/share/man/man8/notifyd.8" "$stage/usr/share/man/man8/notifyd-http.8" \
  "$stage/usr/share/man/man8/notifyd-fleet.8"
# The daemons have no subcommands, but the generator lists the argument parser's implicit `help` one: drop it from
# the synopsis and its entry (from `.It Em help` to the end of its nested list) from the options.
sed -i -e '/^\.Ar subcommand$/d' -e '/^\.It Em help$/,/^\.El$/d' "$stage/usr/share/man/man8/notifyd.8" "$stage/usr/share/man/man8/notifyd-http.8" \
  "$stage/usr/share/man/man8/notifyd-fleet.8"
gzip -9n "$stage/usr/share/man/man1/notify.1" "$stage/usr/share/man/man8/notifyd.8" "$stage/usr/share/man/man8/notifyd-http.8" \
  "$stage/usr/share/man/man8/notifyd-fleet.8"

# Shell completions, generated by each binary itself.
install -d "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
  "$stage/usr/share/fish/vendor_completions.d"
for binary in usr/bin/notify usr/sbin/notifyd usr/sbin/notifyd-http usr/sbin/notifyd-fleet; do
  name=$(basename "$binary")
  # bash-completion sources the file, so the generated #! line is dropped.
  "$stage/$binary" --generate-completion-script bash | sed '1{/^#!/d}' >"$stage/usr/share/bash-completion/completions/$name"
  "$stage/$binary" --generate-completion-script zsh >"$stage/usr/share/zsh/vendor-completions/_$name"
  "$stage/$binary" --generate-completion-script fish >"$stage/usr/share/fish/vendor_completions.d/$name.fish"
done

# Docs.
doc=$stage/usr/share/doc/notifyd
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 PROTOCOL.md "$doc/PROTOCOL.md"
for page in docs/*.md docs/*.png; do install -D -m 0644 "$page" "$doc/$page"; done
install -D -m 0644 packaging/debian/copyright "$doc/copyright"
gzip -9n -c packaging/debian/changelog >"$doc/changelog.gz"
gzip -9n "$doc/README.md" "$doc/PROTOCOL.md" "$doc"/docs/*.md

# Package metadata: dependencies from the libraries the binaries link.
install -d "$stage/DEBIAN"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$stage/DEBIAN/"
install -m 0644 packaging/debian/conffiles "$stage/DEBIAN/conffiles"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debian"
printf 'Source: notifyd\n\nPackage: notifyd\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O "$OLDPWD/$stage/usr/sbin/notifyd" "$OLDPWD/$stage/usr/bin/notify" "$OLDPWD/$stage/usr/sbin/notifyd-http" \
  "$OLDPWD/$stage/usr/sbin/notifyd-fleet" 2>/dev/null \
  | sed -n 's/^shlibs:Depends=//p')
# lld marks packed relocations with the GLIBC_ABI_DT_RELR version, which glibc has from 2.36 on; libc6's symbols
# file does not list it, so dpkg-shlibdeps may ask for less.
versions=$(readelf -V "$stage/usr/sbin/notifyd")
if grep -q GLIBC_ABI_DT_RELR <<<"$versions"; then
  depends=$(echo "$depends" | sed -E 's/libc6 \(>= 2\.(3[0-5]|[12][0-9])[^)]*\)/libc6 (>= 2.36)/')
fi
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
  packaging/debian/control.in >"$stage/DEBIAN/control"
(cd "$stage" && find . \( -path ./DEBIAN -o -path ./etc \) -prune -o -type f -print0 | sort -z | xargs -0 md5sum | sed 's| \./| |') \
  >"$stage/DEBIAN/md5sums"

# xz at its default level (45 MB) takes half a minute here; NOTIFYD_DEB_COMPRESSION (dpkg-deb's -Z and -z) lets
# the packaging tests, which test the same files, take a faster level.
# shellcheck disable=SC2086  # the options are words on purpose
dpkg-deb --root-owner-group ${NOTIFYD_DEB_COMPRESSION:--Zxz} --build "$stage" "$deb" >&2
say "built $(du -h "$deb" | cut -f1): depends on $depends, systemd"
echo "$PWD/$deb"
