#!/usr/bin/env python3
# Where a running process's resident text is: the runs of resident pages of its binary's executable mappings
# (/proc/PID/pagemap, so root), each with the modules whose functions fill it (by symbol, from `nm`), then the total per
# module. A run outside the block the start-up order lays out is code a start ran that the order did not place
# (Benchmarks/Results/idle-memory-2026-12-08.md). Swift symbols are grouped by module; the static runtime's C++ as
# [runtime], the standard library's as [stdlib], the rest as [C].
#   sudo Benchmarks/StartupMemory/resident-text.py PID BINARY
import bisect
import collections
import re
import struct
import subprocess
import sys

pid, binary = sys.argv[1], sys.argv[2]
maps = []
for line in open(f"/proc/{pid}/maps"):
    fields = line.split()
    if len(fields) >= 6 and fields[5].endswith("/" + binary.split("/")[-1]):
        low, high = (int(x, 16) for x in fields[0].split("-"))
        maps.append((low, high, int(fields[2], 16), fields[1]))
if not maps:
    sys.exit(f"resident-text: {binary} is not mapped by process {pid}")
base = min(low - offset for low, _, offset, _ in maps)

symbols = []
for line in subprocess.run(["nm", "-S", "-n", binary], capture_output=True, text=True).stdout.splitlines():
    fields = line.split()
    if len(fields) != 4 or fields[2] not in "tTwW":
        continue
    address, size, name = int(fields[0], 16), int(fields[1], 16), fields[3]
    swift = re.match(r"\$s(\d+)", name)
    if swift:
        module = name[swift.end():swift.end() + int(swift.group(1))]
    elif name.startswith(("$s", "$S")):
        module = "[stdlib]"
    elif name.startswith(("_Z", "swift_", "_swift")):
        module = "[runtime]"
    else:
        module = "[C]"
    symbols.append((address, address + size, module))
symbols.sort()
starts = [start for start, _, _ in symbols]

pagemap = open(f"/proc/{pid}/pagemap", "rb")
runs = []
for low, high, _, permissions in maps:
    if "x" not in permissions:
        continue
    run = None
    for page in range(low, high, 4096):
        pagemap.seek(page // 4096 * 8)
        if not (struct.unpack("Q", pagemap.read(8))[0] >> 63) & 1:
            continue
        if run and run[1] == page:
            run[1] = page + 4096
        else:
            run = [page, page + 4096]
            runs.append(run)

total = collections.Counter()
for low, high in runs:
    per_module = collections.Counter()
    first, last = low - base, high - base
    index = bisect.bisect_left(starts, first)
    while index < len(symbols) and symbols[index][0] < last:
        start, end, module = symbols[index]
        per_module[module] += min(end, last) - start
        index += 1
    total.update(per_module)
    top = ", ".join(f"{module} {size // 1024}" for module, size in per_module.most_common(4))
    print(f"{first:#10x} {(high - low) // 1024:6} KiB  {top}")
print(f"{sum(high - low for low, high in runs) // 1024} KiB of text resident in {len(runs)} runs; KiB per module:")
for module, size in total.most_common(15):
    print(f"{size // 1024:6} {module}")
