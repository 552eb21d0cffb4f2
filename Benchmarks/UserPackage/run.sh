#!/usr/bin/env bash
# From a package of a user's own: builds Benchmarks/UserPackage/main.swift, release, in a temporary package that
# depends on this one by path (as a service would), starts a release notifyd on a socket in a temporary directory,
# and runs the program REPS times (3 by default); prints each run's figures and the median of each case.
#   COUNT=1000000 REPS=3 Benchmarks/UserPackage/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd -P)
reps=${REPS:-3}
count=${COUNT:-1000000}
work=$(mktemp -d)
daemon=
cleanup() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
swift build -c release --product notifyd >/dev/null
mkdir -p "$work/package/Sources/UserBench"
cp Benchmarks/UserPackage/main.swift "$work/package/Sources/UserBench/main.swift"
cat > "$work/package/Package.swift" <<SWIFT
// swift-tools-version: 6.0
import PackageDescription
let package = Package(
    name: "userbench",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "$repo")],
    targets: [.executableTarget(name: "UserBench", dependencies: [.product(name: "NotifyCenter", package: "$(basename "$repo" | tr '[:upper:]' '[:lower:]')")])]
)
SWIFT
(cd "$work/package" && swift build -c release >/dev/null)
socket="$work/notifyd.sock"
.build/release/notifyd --socket "$socket" --state-dir "$work/state" >/dev/null 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done
: > "$work/figures"
for rep in $(seq "$reps"); do
    echo "run $rep"
    "$work/package/.build/release/UserBench" "$socket" "$count" | tee -a "$work/figures"
done
echo "medians of $reps (msg/s), commit $(git rev-parse --short HEAD), $(date -u +%F)"
python3 - "$work/figures" <<'PY'
import sys, statistics, collections
cases = collections.OrderedDict()
for line in open(sys.argv[1]):
    *name, value = line.split()
    cases.setdefault(" ".join(name), []).append(int(value))
for name, values in cases.items():
    print(f"  {name:28} {int(statistics.median(values)):>10,}   ({', '.join(f'{v:,}' for v in values)})")
PY
