import ArgumentParser
import NotifyBench
import NotifyBus

struct Bench: ParsableCommand, ConnectingCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the running daemon: throughput with fan-out, losses, latency, its CPU time and memory.",
        discussion: """
            Follows the method of the C harness that measures Redis, Mosquitto and NATS (shared/anchors), so the \
            figures can be read beside theirs. Two phases, each with its own connections:

            Throughput: --subscribers connections each subscribe to every topic bench.0 … bench.<N-1> (--topics), \
            by name. --publishers connections publish --count messages in all, to the topics in turn, as \
            pre-encoded frames written about 64 KiB at a time, staying at most --window messages ahead of the \
            slowest subscriber (default: 4 MiB of payload, 262,144 messages of 16 bytes; 0: as fast as the daemon \
            takes them). Messages are retained (the daemon's normal path: each becomes its topic's buffered \
            message, kept in the state log) unless --no-retain.

            Latency: one publisher and the same number of subscribers. One message at a time is stamped, \
            published, and awaited until every subscriber has it; after --warmup messages, --latency-count are \
            recorded in an HdrHistogram.

            Each payload starts with 16 bytes: the publisher's sequence number and a timestamp; the rest is filler. \
            The benchmark runs in one thread and counts deliveries straight from its receive buffers, so it uses \
            at most one core.

            The figures:
              published     messages handed to the socket per second, from the first
                            publish to the last byte written (kernel and daemon
                            buffering included)
              delivered     deliveries to all subscribers together per second, from
                            the first publish until the last subscriber has the
                            last message
              lost          deliveries that never came: count × subscribers less
                            those delivered, once every subscriber has everything,
                            or nothing came for 3 s after the last publish; the
                            part the daemon announced with DROP (a subscriber that
                            fell behind) is shown
              out of order  deliveries whose sequence number was not the next one
                            from their publisher: a repeat, a reordering, or a gap
                            that no DROP announced
              p50 … p99.9   latency percentiles, with min, mean and max, in µs:
                            from stamping a message until the last subscriber has
                            read it
              CPU           user + system CPU seconds during each phase: the
                            daemon's (/proc/PID/stat; its pid from SO_PEERCRED on
                            the benchmark's connection) and the benchmark's own;
                            when the benchmark's nears the elapsed time, the
                            benchmark is the bottleneck
              RSS           the daemon's resident memory (VmRSS) at the end
            A figure that cannot be read (no /proc, or socket activation hides the daemon's pid) is n/a, null \
            in JSON.

            Exits 1, and says so, when any delivery was lost or came out of order.

            Example: notify bench --subscribers 100 --size 1024
            """
    )

    @ParentCommand var parent: Notify
    @OptionGroup var connection: ConnectionOptions

    @Option(name: .long, help: ArgumentHelp("Publisher connections in the throughput phase.", valueName: "n"))
    var publishers = 1

    @Option(name: .long, help: ArgumentHelp("Subscriber connections; each receives every message.", valueName: "n"))
    var subscribers = 1

    @Option(name: .long, help: ArgumentHelp("Payload bytes per message, at least 16.", valueName: "bytes"))
    var size = 16

    @Option(name: .long, help: ArgumentHelp("Messages the throughput phase publishes, all publishers together.", valueName: "n"))
    var count = 1_000_000

    @Option(name: .long, help: ArgumentHelp("Topics bench.0 … bench.<n-1> that the messages go to in turn.", valueName: "n"))
    var topics = 1

    @Option(
        name: .long,
        help: ArgumentHelp("Stay at most n messages ahead of the slowest subscriber; 0: no limit (default: 4 MiB / --size).", valueName: "n")
    )
    var window: Int?

    @Option(name: .long, help: ArgumentHelp("Messages the latency phase records.", valueName: "n"))
    var latencyCount = 20_000

    @Option(name: .long, help: ArgumentHelp("Latency messages sent first and not recorded.", valueName: "n"))
    var warmup = 1_000

    @Flag(name: .long, help: "Publish with noretain (default: retained, the daemon's normal path).")
    var noRetain = false

    @Flag(name: .long, help: "Skip the throughput phase.")
    var skipThroughput = false

    @Flag(name: .long, help: "Skip the latency phase.")
    var skipLatency = false

    @Option(
        name: .customLong("subscribe-socket"),
        help: ArgumentHelp(
            "Subscribe on another daemon's socket (one linked to this one through NATS, say): from one host's publisher to another host's subscribers. The daemon figures are the publishing daemon's.",
            valueName: "path"
        )
    )
    var subscribeSocket: String?

    @Option(
        name: .long,
        help: ArgumentHelp("The longest the throughput phase may run; what has not arrived then is lost.", valueName: "seconds")
    )
    var timeLimit: Double = 120

    @Option(name: .long, help: "table or json.")
    var format: TableFormat = .table

    private var benchmark: BenchmarkConfiguration {
        var benchmark = BenchmarkConfiguration()
        benchmark.socketPath = socketPath
        benchmark.subscriberSocketPath = subscribeSocket
        benchmark.publishers = publishers
        benchmark.subscribers = subscribers
        benchmark.payloadSize = size
        benchmark.messageCount = count
        benchmark.topicCount = topics
        benchmark.window = window
        benchmark.latencyCount = latencyCount
        benchmark.warmupCount = warmup
        benchmark.retain = !noRetain
        benchmark.measuresThroughput = !skipThroughput
        benchmark.measuresLatency = !skipLatency
        benchmark.timeLimit = .milliseconds(Int64(timeLimit * 1000))
        return benchmark
    }

    func validate() throws {
        let checks: [(Bool, String)] = [
            (publishers >= 1 && publishers <= BenchmarkPayload.maxPublishers, "--publishers must be 1 to \(BenchmarkPayload.maxPublishers)"),
            (subscribers >= 1, "--subscribers must be at least 1"),
            (size >= BenchmarkPayload.headerSize, "--size must be at least \(BenchmarkPayload.headerSize): the payload starts with a sequence number and a timestamp"),
            (count >= 1, "--count must be at least 1"),
            (topics >= 1, "--topics must be at least 1"),
            ((window ?? 0) >= 0, "--window must be 0 (no limit) or more"),
            (latencyCount >= 1, "--latency-count must be at least 1"),
            (warmup >= 0, "--warmup must be 0 or more"),
            (!(skipThroughput && skipLatency), "--skip-throughput and --skip-latency together leave nothing to measure"),
            (timeLimit > 0 && timeLimit <= Listening.longestWait, "--time-limit must be more than 0 seconds and at most \(Int(Listening.longestWait))"),
        ]
        if let failed = checks.first(where: { !$0.0 }) { throw ValidationError(failed.1) }
        do {
            try benchmark.validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() throws {
        try runReportingFailures {
            let result: BenchmarkResult
            do {
                result = try BenchmarkRun(benchmark).run()
            } catch let error as BenchmarkError {
                throw CommandFailure(.checkFailed, error.message)
            }
            try StandardOutput.write(format == .json ? Bench.json(result) : Bench.table(result))
            if !result.isClean { throw CommandFailure(.checkFailed, Bench.verdict(result)) }
        }
    }

    // MARK: - Output

    /// The result for people: a heading, then one block per phase and one for the daemon, then the verdict.
    static func table(_ result: BenchmarkResult) -> String {
        let configuration = result.configuration
        var out = "notify bench: \(plural(configuration.publishers, "publisher")) → \(plural(configuration.subscribers, "subscriber")), "
        out += "\(NumberText.grouped(UInt64(configuration.payloadSize)))-byte payloads, \(plural(configuration.topicCount, "topic")), "
        out += configuration.retain ? "retained" : "noretain"
        out += result.window == 0 ? ", no window\n" : ", window \(NumberText.grouped(UInt64(result.window))) messages\n"
        let process = result.daemon.process
        out += "daemon: \(process.name ?? "pid unknown")\(process.pid.map { " (pid \($0))" } ?? "") at \(result.socketPath)"
        out += process.unavailableReason.map { "; CPU and RSS n/a: \($0)\n" } ?? "\n"
        if let other = result.configuration.subscriberSocketPath { out += "subscribers at: \(other)\n" }

        // One table for all blocks, so their columns line up; an empty row between blocks.
        var rows: [[String]] = []
        if let throughput = result.throughput {
            rows.append(["", "", ""])
            rows.append(["THROUGHPUT", "\(NumberText.grouped(throughput.messages)) messages", ""])
            rows.append([
                "published", "\(NumberText.grouped(throughput.publishedPerSecond)) msg/s",
                "\(seconds(throughput.publishSeconds)) from the first publish to the last byte written",
            ])
            rows.append([
                "delivered", "\(NumberText.grouped(throughput.deliveredPerSecond)) msg/s",
                "\(NumberText.grouped(throughput.delivered)) of \(NumberText.grouped(throughput.expectedDeliveries)) deliveries in "
                    + "\(seconds(throughput.elapsedSeconds)), until the last subscriber had the last message",
            ])
            rows.append(["lost", NumberText.grouped(throughput.lost), lossNote(throughput)])
            rows.append([
                "out of order", NumberText.grouped(throughput.outOfOrder),
                throughput.outOfOrder > 0 ? "!! deliveries not in their publisher's order" : "",
            ])
            if throughput.publishErrors > 0 {
                rows.append([
                    "publish errors", NumberText.grouped(throughput.publishErrors),
                    "!! refused by the daemon, first: \(throughput.firstPublishError.map { "\($0.code) \($0.message)" } ?? "?")",
                ])
            }
            if throughput.disconnectedSubscribers > 0 {
                rows.append(["disconnected", "\(throughput.disconnectedSubscribers)", "!! subscribers whose connection the daemon closed"])
            }
            rows.append(["CPU", cpu(throughput.daemonCPUSeconds, throughput.benchCPUSeconds), ""])
        }
        if let latency = result.latency {
            let microseconds = { (value: Double) in NumberText.fixed(value, decimals: 1, grouping: true) }
            rows.append(["", "", ""])
            rows.append([
                "LATENCY",
                "\(NumberText.grouped(UInt64(latency.messages))) messages",
                "one at a time, after \(NumberText.grouped(UInt64(latency.warmup))) warm-up",
            ])
            rows.append(["p50", "\(microseconds(latency.p50)) µs", ""])
            rows.append(["p99", "\(microseconds(latency.p99)) µs", ""])
            rows.append(["p99.9", "\(microseconds(latency.p999)) µs", ""])
            rows.append(["min / mean / max", "\(microseconds(latency.min)) / \(microseconds(latency.mean)) / \(microseconds(latency.max)) µs", ""])
            if latency.outOfOrder > 0 {
                rows.append(["out of order", NumberText.grouped(latency.outOfOrder), "!! deliveries not in their publisher's order"])
            }
            rows.append(["CPU", cpu(latency.daemonCPUSeconds, latency.benchCPUSeconds), ""])
        }
        rows.append(["", "", ""])
        rows.append(["DAEMON", "", ""])
        rows.append(["RSS", result.daemon.residentKiB.map { "\(NumberText.fixed(Double($0) / 1024, decimals: 1)) MiB" } ?? "n/a", "at the end"])
        rows.append(["CPU", result.daemon.cpuSeconds.map { seconds($0) } ?? "n/a", "during the run"])
        for line in renderTable(rows).split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            out += line.reversed().drop { $0 == " " }.reversed() + "\n"
        }
        return out + "\n" + verdict(result) + "\n"
    }

    /// The result for programs: one JSON object.
    static func json(_ result: BenchmarkResult) -> String {
        let configuration = result.configuration
        var json = JSONTextWriter()
        json.beginObject()
        json.field("socket", result.socketPath)
        json.field("subscribe_socket", configuration.subscriberSocketPath)
        json.field("publishers", UInt64(configuration.publishers))
        json.field("subscribers", UInt64(configuration.subscribers))
        json.field("payload_bytes", UInt64(configuration.payloadSize))
        json.field("topics", UInt64(configuration.topicCount))
        json.field("retain", configuration.retain)
        json.field("window", UInt64(result.window))
        json.key("throughput")
        if let throughput = result.throughput {
            json.beginObject()
            json.field("messages", throughput.messages)
            json.field("published_per_second", throughput.publishedPerSecond, decimals: 0)
            json.field("delivered_per_second", throughput.deliveredPerSecond, decimals: 0)
            json.field("publish_seconds", throughput.publishSeconds, decimals: 6)
            json.field("elapsed_seconds", throughput.elapsedSeconds, decimals: 6)
            json.field("expected_deliveries", throughput.expectedDeliveries)
            json.field("delivered", throughput.delivered)
            json.field("lost", throughput.lost)
            json.field("dropped", throughput.dropped)
            json.field("drop_notices", throughput.dropNotices)
            json.field("out_of_order", throughput.outOfOrder)
            json.field("publish_errors", throughput.publishErrors)
            json.field("first_publish_error", throughput.firstPublishError.map { "\($0.code) \($0.message)" })
            json.field("disconnected_subscribers", UInt64(throughput.disconnectedSubscribers))
            json.field("ended", throughput.ending.rawValue)
            json.field("daemon_cpu_seconds", throughput.daemonCPUSeconds, decimals: 3)
            json.field("bench_cpu_seconds", throughput.benchCPUSeconds, decimals: 3)
            json.endObject()
        } else {
            json.null()
        }
        json.key("latency")
        if let latency = result.latency {
            json.beginObject()
            json.field("messages", UInt64(latency.messages))
            json.field("warmup", UInt64(latency.warmup))
            json.field("p50_us", latency.p50, decimals: 3)
            json.field("p99_us", latency.p99, decimals: 3)
            json.field("p999_us", latency.p999, decimals: 3)
            json.field("min_us", latency.min, decimals: 3)
            json.field("mean_us", latency.mean, decimals: 3)
            json.field("max_us", latency.max, decimals: 3)
            json.field("out_of_order", latency.outOfOrder)
            json.field("elapsed_seconds", latency.elapsedSeconds, decimals: 6)
            json.field("daemon_cpu_seconds", latency.daemonCPUSeconds, decimals: 3)
            json.field("bench_cpu_seconds", latency.benchCPUSeconds, decimals: 3)
            json.endObject()
        } else {
            json.null()
        }
        json.key("daemon")
        json.beginObject()
        json.key("pid")
        if let pid = result.daemon.process.pid { json.number(Int64(pid)) } else { json.null() }
        json.field("name", result.daemon.process.name)
        json.field("rss_kib", result.daemon.residentKiB)
        json.field("cpu_seconds", result.daemon.cpuSeconds, decimals: 3)
        json.field("unavailable_reason", result.daemon.process.unavailableReason)
        json.endObject()
        json.field("lost", result.lost)
        json.field("out_of_order", result.outOfOrder)
        json.field("ok", result.isClean)
        json.endObject()
        return json.text + "\n"
    }

    /// One sentence on whether every message reached every subscriber in order.
    static func verdict(_ result: BenchmarkResult) -> String {
        if result.isClean {
            return result.throughput == nil && result.latency != nil
                ? "OK: every latency message reached every subscriber, in order"
                : "OK: every message reached every subscriber, in order"
        }
        var sentence = "FAILED: "
        if let throughput = result.throughput, throughput.lost > 0 {
            sentence += "\(NumberText.grouped(throughput.lost)) of \(NumberText.grouped(throughput.expectedDeliveries)) deliveries were lost"
            if throughput.dropped > 0 { sentence += " (\(NumberText.grouped(throughput.dropped)) dropped by the daemon, as DROP said)" }
            sentence += result.outOfOrder > 0 ? ", and " : ""
        }
        if result.outOfOrder > 0 { sentence += "\(NumberText.grouped(result.outOfOrder)) deliveries came out of order" }
        return sentence
    }

    private static func lossNote(_ throughput: BenchmarkResult.Throughput) -> String {
        var notes: [String] = []
        if throughput.dropped > 0 {
            notes.append(
                "\(NumberText.grouped(throughput.dropped)) announced as dropped in \(plural(Int(throughput.dropNotices), "DROP notice"))"
            )
        }
        switch throughput.ending {
        case .complete: break
        case .quiet: notes.append("nothing came for 3 s after the last publish")
        case .timeLimit: notes.append("the phase hit its time limit (--time-limit)")
        case .disconnected: notes.append("the daemon closed every subscriber")
        }
        guard throughput.lost > 0 else { return "" }
        return (["!!"] + notes).joined(separator: " ")
    }

    private static func cpu(_ daemon: Double?, _ bench: Double) -> String {
        "daemon \(daemon.map { seconds($0) } ?? "n/a"), notify bench \(seconds(bench))"
    }

    private static func seconds(_ value: Double) -> String { NumberText.fixed(value, decimals: 3) + " s" }

    private static func plural(_ count: Int, _ noun: String) -> String {
        "\(NumberText.grouped(UInt64(count))) \(noun)\(count == 1 ? "" : "s")"
    }
}
