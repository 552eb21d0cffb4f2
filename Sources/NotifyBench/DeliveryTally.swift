public import NotifyBus
/// What one connection of a benchmark has received: deliveries counted and checked against the numbering the
/// publishers put in their payloads (``BenchmarkPayload``), the drops the daemon announced, replies and errors.
///
/// ``FrameScanner`` fills it in; it needs no socket, so the accounting is tested on bytes alone.
///
/// - **Out of order** counts deliveries whose sequence number is not the next one expected from their publisher: a
///   message that came again or after a later one, or one that came after a gap the daemon did not announce. A gap
///   that `DROP` notices announced (the daemon dropped messages for a subscriber that fell behind, by its policy)
///   is not out of order: those messages count as lost, and as ``dropped``.
/// - **Lost** is what was expected less what was delivered; ``dropped`` is the part of it the daemon announced.
public struct DeliveryTally: Sendable {
    /// Deliveries (`MSG` frames) received.
    public private(set) var delivered: UInt64 = 0
    /// Messages the daemon announced as dropped for this connection (the sum of the `DROP` notices' counts).
    public private(set) var dropped: UInt64 = 0
    /// `DROP` notices received.
    public private(set) var dropNotices: UInt64 = 0
    /// Deliveries that came out of order (see the type's description).
    public private(set) var outOfOrder: UInt64 = 0
    /// `OK` replies received (one per `SUB`).
    public private(set) var confirmations: UInt64 = 0
    /// `PONG` replies received.
    public private(set) var pongs: UInt64 = 0
    /// `ERR` replies received.
    public private(set) var errors: UInt64 = 0
    /// The first `ERR` reply, to say what went wrong.
    public private(set) var firstError: ProtocolError?
    /// The deliveries this connection should receive in all.
    public let expected: UInt64
    /// When the delivery or drop notice arrived that made delivered plus dropped reach ``expected``
    /// (nanoseconds on the benchmark's clock).
    public private(set) var completedAt: UInt64?
    /// When the latest delivery arrived.
    public private(set) var lastDeliveryAt: UInt64?

    /// The next sequence number expected from each publisher.
    private var nextSequence: [UInt64]
    /// Dropped messages announced but not yet seen as a gap in a publisher's numbering.
    private var unexplainedDrops: UInt64 = 0

    /// Creates the tally of a connection that should receive `expected` deliveries from `publishers` publishers.
    public init(publishers: Int, expected: UInt64) {
        nextSequence = [UInt64](repeating: 0, count: max(publishers, 1))
        self.expected = expected
    }

    /// Expected deliveries that were not delivered.
    public var lost: UInt64 { expected > delivered ? expected - delivered : 0 }

    /// Whether every expected message was delivered or announced as dropped: nothing more will come.
    public var isComplete: Bool { delivered + dropped >= expected }

    /// Delivered plus dropped: how far this subscriber has got through what was published.
    public var accountedFor: UInt64 { delivered + dropped }

    /// Whether message `sequence` of `publisher`, or a later one, has been delivered.
    public func hasReceived(_ sequence: UInt64, from publisher: Int) -> Bool {
        publisher < nextSequence.count && nextSequence[publisher] > sequence
    }

    /// Counts a delivery whose payload header holds `numbering`, arrived at `now`.
    @inline(__always)
    mutating func recordDelivery(numbering: UInt64, at now: UInt64) {
        delivered += 1
        lastDeliveryAt = now
        let (publisher, sequence) = BenchmarkPayload.split(numbering)
        if publisher < nextSequence.count {
            let next = nextSequence[publisher]
            if sequence > next {
                let gap = sequence - next
                if gap <= unexplainedDrops {
                    unexplainedDrops -= gap  // a gap the daemon announced
                } else {
                    unexplainedDrops = 0
                    outOfOrder += 1
                }
            } else if sequence < next {
                outOfOrder += 1  // again, or after a later one
            }
            nextSequence[publisher] = sequence &+ 1
        } else {
            outOfOrder += 1  // not a numbering of this run
        }
        noteCompletion(at: now)
    }

    /// Counts a delivery whose payload is too short to carry a header: not a message of this run.
    mutating func recordUnnumberedDelivery(at now: UInt64) {
        delivered += 1
        outOfOrder += 1
        lastDeliveryAt = now
        noteCompletion(at: now)
    }

    /// Counts a `DROP` notice of `count` messages, arrived at `now`.
    mutating func recordDrop(count: UInt64, at now: UInt64) {
        dropNotices += 1
        dropped += count
        unexplainedDrops += count
        noteCompletion(at: now)
    }

    mutating func recordConfirmation() { confirmations += 1 }

    mutating func recordPong() { pongs += 1 }

    mutating func recordError(_ error: ProtocolError) {
        errors += 1
        if firstError == nil { firstError = error }
    }

    @inline(__always)
    private mutating func noteCompletion(at now: UInt64) {
        if completedAt == nil && delivered + dropped >= expected { completedAt = now }
    }
}
