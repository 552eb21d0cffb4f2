#!/usr/bin/env python3
"""Turn the raw results of anchors.sh into Markdown tables.

    summarize.py results.txt > results.md

Each cell is the median over the repetitions, with min-max after it when
there was more than one.  The "# key: value" lines at the top of the raw
results (date, commit, command) come first, so a table never goes without
them.  The layout is that of every results-*.md in Benchmarks/Anchors, so
that runs compare.
"""
import statistics
import sys
from collections import defaultdict

# Display names, with the versions of the runs so far (Debian 12's).
SERVER = {
    "floor": "echo process (floor)",
    "redis": "Redis 7.0 (unix)",
    "mqtt": "Mosquitto 2.0 (unix)",
    "nats": "NATS 2.9 (tcp lo)",
    "notifyd": "notifyd",
}
ORDER = list(SERVER)


def parse_value(text):
    """Numbers as floats, anything else (proto=redis, cpu=any) as is."""
    if "." in text or text.lstrip("-").isdigit():
        try:
            return float(text)
        except ValueError:
            pass
    return text


def load(path):
    header, rows = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("# ") and ": " in line:
                key, _, value = line[2:].rstrip("\n").partition(": ")
                header.append((key, value))
            elif line.startswith("RESULT "):
                rows.append({k: parse_value(v) for k, _, v in
                             (tok.partition("=") for tok in line.split()[1:])})
    return header, rows


# ---------------------------------------------------------------- formats

def rate(x):
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def fixed(digits):
    return lambda x: f"{x:.{digits}f}"


def cell(values, fmt=rate):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    middle = fmt(statistics.median(values))
    if len(values) == 1:
        return middle
    return f"{middle} ({fmt(min(values))}–{fmt(max(values))})"


def by(rows, mode, *keys):
    """The rows of one mode, grouped by the values of `keys`, in order."""
    groups = defaultdict(list)
    for r in rows:
        if r.get("mode") == mode:
            groups[tuple(r.get(k) for k in keys)].append(r)
    return groups


def server_rank(proto):
    return ORDER.index(proto) if proto in ORDER else 99


# ---------------------------------------------------------------- sections

def header(items):
    if not items:
        return
    for key, value in items:
        print(f"- {key}: `{value}`" if key == "command" else f"- {key}: {value}")
    print()


def throughput(rows):
    for paced in (True, False):
        chosen = [r for r in rows if r.get("mode") == "throughput"
                  and (r.get("window", 0) > 0) == paced]
        if not chosen:
            continue
        if paced:
            print("### Throughput, paced: publisher at most 4 MiB ahead of the slowest "
                  "subscriber (one publisher, one topic, QoS 0)\n")
        else:
            print("### Throughput, firehose: no pacing, the servers' own limits apply\n")
        throughput_table(by(chosen, "throughput", "payload", "subs", "proto"))


def throughput_table(groups):
    print("| payload B | subs | msgs | server | published msg/s | delivered msg/s "
          "| msgs fanned out/s | lost (max) | server CPU µs/delivery "
          "| server CPU % | bench CPU % |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in sorted(groups, key=lambda k: (k[0], k[1], server_rank(k[2]))):
        payload, subs, proto = key
        rs = groups[key]
        # CPU figures only where the server's CPU time was read (-p).
        measured = [r for r in rs if r.get("delivered") and r.get("srv_cpu_s", -1) >= 0]
        per_delivery = [r["srv_cpu_s"] * 1e6 / r["delivered"] for r in measured]
        server_pct = [100 * r["srv_cpu_s"] / r["elapsed_s"] for r in measured]
        bench_pct = [100 * r["bench_cpu_s"] / r["elapsed_s"] for r in measured]
        print(f"| {payload:.0f} | {subs:.0f} | {rate(rs[0]['msgs'])} | {SERVER[proto]} "
              f"| {cell([r['pub_rate'] for r in rs])} | {cell([r['deliv_rate'] for r in rs])} "
              f"| {cell([r['msg_rate'] for r in rs])} | {max(r['lost'] for r in rs):.0f} "
              f"| {cell(per_delivery, fixed(2))} | {cell(server_pct, fixed(0))} "
              f"| {cell(bench_pct, fixed(0))} |")
    print()


PLACEMENT = {"any": "not pinned", "same": "all on CPU 0",
             "split": "server CPU 1, client CPU 0"}


def latency(rows):
    groups = by(rows, "latency", "payload", "cpu", "proto")
    if not groups:
        return
    place_rank = {p: i for i, p in enumerate(PLACEMENT)}
    print("### Latency, publish to delivery, one message at a time (µs)\n")
    print("| payload B | placement | server | p50 | p99 | p99.9 | runs |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for key in sorted(groups, key=lambda k: (k[0], place_rank.get(k[1], 9), server_rank(k[2]))):
        payload, place, proto = key
        rs = groups[key]
        print(f"| {payload:.0f} | {PLACEMENT.get(place, str(place))} | {SERVER[proto]} "
              f"| {cell([r['p50_us'] for r in rs], fixed(1))} "
              f"| {cell([r['p99_us'] for r in rs], fixed(1))} "
              f"| {cell([r['p999_us'] for r in rs], fixed(1))} | {len(rs)} |")
    print()


def cli(rows):
    groups = by(rows, "cli", "label")
    if not groups:
        return
    timev = by(rows, "timev", "label")
    hyperfine = by(rows, "hyperfine", "label")
    listen = by(rows, "listen", "proto")
    print("### Per-invocation CLI publish cost (sequential spawns, ms)\n")
    print("| command | median | p95 | peak RSS KiB (time -v) | failures |")
    print("|---|---:|---:|---:|---:|")
    for (label,), rs in groups.items():     # in the order they ran
        rss = [r["maxrss_kb"] for r in timev.get((label,), [])
               if isinstance(r["maxrss_kb"], float)]
        print(f"| {label} | {cell([r['median_ms'] for r in rs], fixed(2))} "
              f"| {cell([r['p95_ms'] for r in rs], fixed(2))} "
              f"| {cell(rss, fixed(0))} | {sum(r['failures'] for r in rs):.0f} |")
    print()
    if listen:
        seen = []
        for (proto,), rs in sorted(listen.items(), key=lambda kv: server_rank(kv[0][0])):
            got = sum(r["received"] for r in rs)
            expected = sum(r["expected"] for r in rs)
            seen.append(f"{proto} {got:.0f}/{expected:.0f}")
        print("Messages seen by a subscriber during the CLI runs (received/expected): "
              + ", ".join(seen) + "\n")
    if hyperfine:
        series = [f"{label}: median {rs[0]['median_ms']:.2f} ms, p95 {rs[0]['p95_ms']:.2f} ms"
                  for (label,), rs in hyperfine.items()]
        print("hyperfine -N cross-check (one series): " + "; ".join(series) + "\n")


def memory(rows):
    idle = by(rows, "idle", "proto")
    fill = by(rows, "fill", "proto")
    if not idle and not fill:
        return
    mib = lambda kb: f"{kb / 1024.0:.1f}"  # noqa: E731
    print("### Server memory (RSS, fresh server per measurement)\n")
    print("| server | idle RSS MiB | with 1000 subscribed idle conns MiB | KiB per conn "
          "| with 100k retained/stored topics MiB | bytes per topic |")
    print("|---|---:|---:|---:|---:|---:|")
    for proto in ORDER:
        i = idle.get((proto,), [])
        f = [r for r in fill.get((proto,), []) if "rss_kb" in r]   # not "unsupported"
        if not i and not f:
            continue
        print(f"| {SERVER[proto]} | {cell([r['rss_before_kb'] for r in i], mib)} "
              f"| {cell([r['rss_kb'] for r in i], mib)} "
              f"| {cell([r['per_conn_kb'] for r in i], fixed(1))} "
              f"| {cell([r['rss_kb'] for r in f], mib)} "
              f"| {cell([r['per_topic_b'] for r in f], fixed(0))} |")
    print()


def main():
    items, rows = load(sys.argv[1])
    header(items)
    throughput(rows)
    latency(rows)
    cli(rows)
    memory(rows)


if __name__ == "__main__":
    main()
