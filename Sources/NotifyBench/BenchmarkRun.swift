import NotifyBus
/// `notify bench`'s engine: measures a running daemon the way the neutral C harness in `shared/anchors` measures
/// Redis, Mosquitto and NATS, so that the figures can be read side by side.
///
/// ```swift
/// var configuration = BenchmarkConfiguration()
/// configuration.subscribers = 16
/// let result = try BenchmarkRun(configuration).run()
/// print(result.throughput!.deliveredPerSecond, result.latency!.p99, result.isClean)
/// ```
///
/// Two phases, each with connections of its own (see `ThroughputPhase` and `LatencyPhase` in the source):
/// throughput, where publishers pipeline pre-encoded frames in ~64 KiB writes and subscribers count deliveries;
/// then latency, one message at a time. Subscribers subscribe to each topic `bench.<i>` by name. Everything runs in
/// the calling thread around one `poll` loop, so the benchmark uses at most one core, and it reads deliveries with
/// ``FrameScanner``, which allocates nothing per message; the result gives the benchmark's own CPU time beside the
/// daemon's, to tell which side was the bottleneck.
///
/// The daemon's process is found with `SO_PEERCRED` on the benchmark's own connection, and its CPU time and memory
/// read from `/proc`; where that is impossible (socket activation, no `/proc`) those figures are nil.
public struct BenchmarkRun: Sendable {
    /// What to measure.
    public var configuration: BenchmarkConfiguration

    /// Prepares a benchmark.
    public init(_ configuration: BenchmarkConfiguration) {
        self.configuration = configuration
    }

    /// Runs the phases and returns what they measured. Blocks the calling thread for the whole run.
    /// - Throws: ``BenchmarkError`` for a configuration that cannot work or a latency message that never arrived;
    ///   ``NotifyClientError`` when the daemon cannot be reached or refuses (a payload over its limit, a
    ///   subscription limit).
    public func run() throws -> BenchmarkResult {
        try configuration.validate()
        let path = SocketPath.resolveForClient(explicit: configuration.socketPath)
        let process: DaemonProcess
        do {
            let probe = try BenchConnection(path: path, tally: DeliveryTally(publishers: 1, expected: 0))
            let limit = probe.greeting.limits.maxPayload
            if configuration.payloadSize > limit {
                throw NotifyClientError.payloadTooLarge(configuration.payloadSize, limit: limit)
            }
            process = DaemonProcess.peer(of: probe.descriptor)
        }
        let before = process.usage()
        let throughput = try configuration.measuresThroughput ? ThroughputPhase(configuration: configuration, path: path, daemon: process).run() : nil
        let latency = try configuration.measuresLatency ? LatencyPhase(configuration: configuration, path: path, daemon: process).run() : nil
        let after = process.usage()
        return BenchmarkResult(
            configuration: configuration,
            socketPath: path,
            window: configuration.effectiveWindow,
            throughput: throughput,
            latency: latency,
            daemon: BenchmarkResult.Daemon(
                process: process,
                residentKiB: after?.residentKiB,
                cpuSeconds: before.flatMap { before in after.map { $0.cpuSeconds - before.cpuSeconds } }
            )
        )
    }
}
