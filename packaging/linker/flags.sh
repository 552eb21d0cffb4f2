# Sourced by packaging/build-deb.sh and packaging/linker/order-startup.sh: how the packaged binaries are built, in
# one place. `packaged_build_flags SCRATCH [ORDERS]` sets daemon_build, gateway_build and cli_build, the `swift
# build` arguments of notifyd (and notifyd-fleet), notifyd-http (its own order) and notify's modules, all in the one
# scratch SCRATCH, laid out by the order files in ORDERS (by default packaging/linker, where they are kept);
# `link_static_notify` then links notify. Run from the repository's root.
#
# Both are linked so that start-up touches as few of their pages as it can (docs/performance.md: idle RSS
# and `notify send` peak RSS):
# - by lld, each function in its own section, in the order of packaging/linker/notifyd.order and notify.order: the
#   functions a start (and a first client, or one `notify send`) runs, in the order they first run, written by
#   order-startup.sh. Without it they are spread over the whole text, and the kernel maps 64 KiB around each page
#   touched. A name the order no longer matches is skipped: a stale order costs memory, never correctness. The
#   functions a start runs that have no symbol for the order to name (LLVM's private ones: closure contexts'
#   destroy functions, key path accessors) are placed by NAME.ld, a linker script naming their object and section,
#   in an output section just before .text; a section it names that is gone matches nothing.
# notifyd and notifyd-http also:
# - with relative relocations packed (DT_RELR, glibc 2.36): the loader reads 11 KiB of them instead of the
#   1.3 MiB of RELA entries it otherwise reads at every start;
# - exporting no symbols: the Swift runtime's static link exports every symbol (-export-dynamic), 1.4 MiB of
#   tables that the loader searches whenever libc resolves a name, and nothing needs them;
# - with libstdc++ linked in (its archive, through a linker script that stands in for libstdc++.so): only the parts
#   the Swift runtime uses, without the shared library's 1 MiB of pages touched by its own start-up.
# Both are also built without the runtime's dynamic exclusivity checks (-enforce-exclusivity=unchecked), for every
# module: the daemon's own state on the publish path is marked @exclusivity(unchecked) already, and what was left
# were the checks inside NIO's ByteBuffer, inlined into the broker's code, some 5% of a small publish (docs/performance.md,
# "No exclusivity checks"). Debug builds, which every test runs, keep them, so an overlapping access a test reaches still
# traps there. Not in Package.swift: unsafe flags there would stop other packages from depending on NotifyBus.
# notify is linked fully static (glibc too): without a dynamic loader resolving libstdc++ against its thousands of
# exported symbols, each `notify send` is faster (docs/service.md has the measured figures). It needs
# nothing from NSS. notifyd and notifyd-http stay dynamic for the C libraries: the daemon looks up the users its
# settings and access rules name through glibc's NSS, which a static glibc cannot load. notify's modules are compiled
# in the daemon's scratch with the daemon's flags, and `link_static_notify` links them fully static itself: given to
# SwiftPM, `-static-executable` goes into every compile command too (it passes -Xswiftc flags to all of them), which
# meant a second release build of NIO and everything else notify uses, a minute of every packaging.
packaged_build_flags() {
  local scratch=$1 orders=${2:-$PWD/packaging/linker} linker=$PWD/packaging/linker
  local cxx=$PWD/$scratch/static-libstdc++ cxx_archive="" compiler
  # A compiler that does not find the file prints its bare name.
  for compiler in gcc clang; do
    command -v "$compiler" >/dev/null || continue
    cxx_archive=$("$compiler" -print-file-name=libstdc++.a 2>/dev/null || true)
    [ -f "$cxx_archive" ] && break
  done
  if [ ! -f "$cxx_archive" ]; then
    echo "packaging: no libstdc++.a (install libstdc++-12-dev)" >&2
    return 1
  fi
  mkdir -p "$cxx"
  echo "INPUT($cxx_archive)" >"$cxx/libstdc++.so"
  local common=(-c release --static-swift-stdlib --scratch-path "$scratch"
    -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcc -ffunction-sections
    -Xswiftc -use-ld=lld -Xlinker --no-warn-symbol-ordering
    -Xswiftc -enforce-exclusivity=unchecked -Xswiftc -L"$cxx")
  local server=(-Xlinker -z -Xlinker pack-relative-relocs
    -Xlinker --version-script="$linker/export-nothing.map")
  daemon_build=("${common[@]}" -Xlinker --symbol-ordering-file="$orders/notifyd.order"
    -Xlinker --script="$orders/notifyd.ld" "${server[@]}")
  gateway_build=("${common[@]}" -Xlinker --symbol-ordering-file="$orders/notifyd-http.order"
    -Xlinker --script="$orders/notifyd-http.ld" "${server[@]}")
  # notify's modules, compiled as the daemon's are (SwiftPM links a dynamic notify too, which is not shipped).
  cli_build=("${common[@]}")
  notify_order=$orders/notify.order
  notify_script=$orders/notify.ld
}

# `link_static_notify BIN OUT [LINK FLAGS…]`: links notify fully static into OUT from the objects `swift build
# "${cli_build[@]}" --product notify` compiled into BIN (SwiftPM's list of them, and its own link command but for
# -static-executable), laid out in the order of $notify_order.
link_static_notify() {
  local bin=$1 out=$2
  shift 2
  local objects=$bin/notify.product/Objects.LinkFileList
  [ -f "$objects" ] || { echo "packaging: no $objects (build notify with cli_build first)" >&2; return 1; }
  swiftc -o "$out" -module-name notify -emit-executable -static-stdlib -static-executable \
    -target "$(basename "$(dirname "$bin")")" -use-ld=lld \
    -Xlinker --gc-sections -Xlinker --defsym -Xlinker main=notify_cli_main "@$objects" -lm \
    -Xlinker --no-warn-symbol-ordering -Xlinker --symbol-ordering-file="$notify_order" \
    -Xlinker --script="$notify_script" "$@"
}
