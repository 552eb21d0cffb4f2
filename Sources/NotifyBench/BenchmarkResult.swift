public import NotifyBus
/// What a benchmark measured (see ``BenchmarkRun``).
public struct BenchmarkResult: Sendable {
    /// The configuration it ran with.
    public var configuration: BenchmarkConfiguration
    /// The socket it used.
    public var socketPath: String
    /// The window in force (0: none).
    public var window: Int
    /// The throughput phase, unless it was skipped.
    public var throughput: Throughput?
    /// The latency phase, unless it was skipped.
    public var latency: Latency?
    /// The daemon's process and what it used.
    public var daemon: Daemon

    /// Deliveries that never came (throughput phase).
    public var lost: UInt64 { throughput?.lost ?? 0 }
    /// Deliveries that came out of order, in both phases.
    public var outOfOrder: UInt64 { (throughput?.outOfOrder ?? 0) + (latency?.outOfOrder ?? 0) }
    /// Whether every message reached every subscriber, in order.
    public var isClean: Bool { lost == 0 && outOfOrder == 0 }

    /// The throughput phase: publishers pipeline their messages, subscribers count them.
    public struct Throughput: Sendable {
        /// Messages published, all publishers together.
        public var messages: UInt64
        /// Messages times subscribers.
        public var expectedDeliveries: UInt64
        /// Deliveries received, all subscribers together.
        public var delivered: UInt64
        /// Expected deliveries that did not come before the phase ended.
        public var lost: UInt64
        /// Of those, the messages the daemon announced as dropped (`DROP`) for subscribers that fell behind.
        public var dropped: UInt64
        /// `DROP` notices received.
        public var dropNotices: UInt64
        /// Deliveries whose sequence number was not the next one of their publisher, gaps announced by `DROP` aside.
        public var outOfOrder: UInt64
        /// `ERR` replies the publishers received (a refused publish is not delivered either).
        public var publishErrors: UInt64
        /// The first of them, to say what the daemon refused.
        public var firstPublishError: ProtocolError?
        /// Subscribers whose connection the daemon closed during the phase.
        public var disconnectedSubscribers: Int
        /// Why the phase ended.
        public var ending: Ending
        /// Seconds from the first publish to the last byte written.
        public var publishSeconds: Double
        /// Seconds from the first publish until the last subscriber had its last message (or the last delivery,
        /// when some never came).
        public var elapsedSeconds: Double
        /// Messages handed to the socket per second: ``messages`` / ``publishSeconds``.
        public var publishedPerSecond: Double
        /// Deliveries to all subscribers per second: ``delivered`` / ``elapsedSeconds``.
        public var deliveredPerSecond: Double
        /// The daemon's CPU time (user and system) during the phase, when it could be read.
        public var daemonCPUSeconds: Double?
        /// The benchmark's own CPU time during the phase, to tell which side was the bottleneck.
        public var benchCPUSeconds: Double

        /// Why a throughput phase ended.
        public enum Ending: String, Sendable {
            /// Every subscriber had every message, or was told it was dropped.
            case complete
            /// Nothing arrived for the quiet period after everything was published.
            case quiet
            /// The phase's time limit ran out.
            case timeLimit = "time-limit"
            /// The daemon closed every subscriber's connection.
            case disconnected
        }
    }

    /// The latency phase: one message at a time, from stamping it to the moment the last subscriber has it.
    public struct Latency: Sendable {
        /// Messages recorded.
        public var messages: Int
        /// Messages sent before, not recorded.
        public var warmup: Int
        // Microseconds, from an HdrHistogram of nanoseconds with 3 significant digits.
        /// The median.
        public var p50: Double
        /// The 99th percentile.
        public var p99: Double
        /// The 99.9th percentile.
        public var p999: Double
        /// The fastest.
        public var min: Double
        /// The slowest.
        public var max: Double
        /// The mean.
        public var mean: Double
        /// Deliveries that came out of order.
        public var outOfOrder: UInt64
        /// Seconds the phase took, warm-up included.
        public var elapsedSeconds: Double
        /// The daemon's CPU time during the phase, when it could be read.
        public var daemonCPUSeconds: Double?
        /// The benchmark's own CPU time during the phase.
        public var benchCPUSeconds: Double
    }

    /// The daemon's process.
    public struct Daemon: Sendable {
        /// Its process (id, name, or why it is unknown).
        public var process: DaemonProcess
        /// Its resident set size (`VmRSS`) at the end of the run, in KiB.
        public var residentKiB: UInt64?
        /// Its CPU time during the whole run, in seconds.
        public var cpuSeconds: Double?
    }
}
