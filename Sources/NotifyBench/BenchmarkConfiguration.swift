public import NotifyBus
/// What a benchmark measures, and how: its connections, its messages and its phases (see ``BenchmarkRun``).
///
/// The defaults are those of `notify bench`: one publisher and one subscriber, 1,000,000 messages of 16 bytes to
/// one topic, paced by a window of 4 MiB of payload, then 20,000 one-at-a-time messages for latency after 1,000
/// warm-up ones.
public struct BenchmarkConfiguration: Sendable, Hashable {
    /// The daemon's socket; nil resolves it as every client does (``SocketPath/resolveForClient(explicit:environment:uid:)``).
    public var socketPath: String?
    /// Another daemon's socket for the subscribers, or nil for the same daemon: with two daemons linked through NATS,
    /// this measures a message from one host's publisher to another host's subscribers.
    public var subscriberSocketPath: String?
    /// Publisher connections in the throughput phase; the latency phase publishes over one.
    public var publishers = 1
    /// Subscriber connections; each subscribes to every benchmark topic.
    public var subscribers = 1
    /// Payload bytes of each message, at least ``BenchmarkPayload/headerSize``.
    public var payloadSize = 16
    /// Messages the throughput phase publishes, all publishers together.
    public var messageCount = 1_000_000
    /// Topics `bench.0` to `bench.<count-1>`, which each publisher's messages go to in turn. Each subscriber
    /// subscribes to every one of them by its exact name (as the C harness subscribes to its one topic), so it
    /// holds this many subscriptions.
    public var topicCount = 1
    /// Publishers stay at most this many messages ahead of the slowest subscriber (counting what it received or was
    /// told was dropped); 0 sends as fast as the socket takes them (firehose); nil means 4 MiB of payload
    /// (``defaultWindowBytes`` / ``payloadSize``), the C harness's pacing.
    public var window: Int?
    /// Messages the latency phase records.
    public var latencyCount = 20_000
    /// Messages the latency phase sends first without recording them.
    public var warmupCount = 1_000
    /// Whether messages are published retained (the daemon's normal path: each becomes its topic's buffered
    /// message, kept in the state log) or `noretain`.
    public var retain = true
    /// Whether to run the throughput phase.
    public var measuresThroughput = true
    /// Whether to run the latency phase.
    public var measuresLatency = true
    /// Bytes each publisher writes at a time (whole frames, at least one round of the topics).
    public var batchBytes = 64 * 1024
    /// Once everything is published, how long without a delivery before the missing messages count as lost.
    public var quietPeriod: Duration = .seconds(3)
    /// The longest the throughput phase may run; what has not arrived then counts as lost.
    public var timeLimit: Duration = .seconds(120)
    /// How long one latency message may take to reach every subscriber before the phase fails.
    public var latencyTimeout: Duration = .seconds(5)

    /// The payload the default window allows in flight: 4 MiB.
    public static let defaultWindowBytes = 4 << 20

    /// A configuration with the defaults.
    public init() {}

    /// The window in force: ``window`` (0: none), or 4 MiB of payload.
    public var effectiveWindow: Int { window ?? max(1, BenchmarkConfiguration.defaultWindowBytes / max(payloadSize, 1)) }

    /// The benchmark's topics.
    public var topics: [Topic] { (0..<topicCount).map { Topic(unchecked: "bench.\($0)") } }

    /// Checks the numbers.
    /// - Throws: ``BenchmarkError`` naming the first one that cannot work.
    public func validate() throws(BenchmarkError) {
        func check(_ holds: Bool, _ message: String) throws(BenchmarkError) {
            if !holds { throw BenchmarkError(message) }
        }
        try check(publishers >= 1 && publishers <= BenchmarkPayload.maxPublishers, "publishers must be 1 to \(BenchmarkPayload.maxPublishers)")
        try check(subscribers >= 1, "subscribers must be at least 1")
        try check(payloadSize >= BenchmarkPayload.headerSize, "the payload size must be at least \(BenchmarkPayload.headerSize) bytes (the header)")
        try check(messageCount >= 1, "the message count must be at least 1")
        try check(topicCount >= 1, "topics must be at least 1")
        try check((window ?? 0) >= 0, "the window must be 0 (none) or more")
        try check(latencyCount >= 1, "the latency message count must be at least 1")
        try check(warmupCount >= 0, "the warm-up count must be 0 or more")
        try check(measuresThroughput || measuresLatency, "nothing to measure: both phases are skipped")
    }
}
