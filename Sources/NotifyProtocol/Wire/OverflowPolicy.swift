/// What the daemon does when a subscriber falls so far behind that its connection's queue is full (see
/// PROTOCOL.md, "Slow subscribers"). Chosen per subscription.
public enum OverflowPolicy: String, Sendable, Hashable, CaseIterable {
    /// Drop the oldest queued messages to make room, and say so with `DROP`. The default.
    case dropOldest = "drop-oldest"
    /// Keep only the newest queued message of each topic (older ones are replaced, and `DROP` says so); when every
    /// queued message is of a different topic, drop the oldest.
    case latestOnly = "latest-only"
    /// Close the connection rather than lose a message without the subscriber reading it.
    case disconnect

    /// When several of a connection's subscriptions match a message, the strictest policy applies: a subscriber
    /// that asked to be disconnected rather than miss a message must not miss it through another subscription.
    package static func strictest(_ a: OverflowPolicy, _ b: OverflowPolicy) -> OverflowPolicy {
        func rank(_ policy: OverflowPolicy) -> Int {
            switch policy {
            case .latestOnly: return 0
            case .dropOldest: return 1
            case .disconnect: return 2
            }
        }
        return rank(a) >= rank(b) ? a : b
    }
}

/// Messages of one topic that the daemon dropped for a subscriber that fell behind (`DROP`).
public struct DropNotice: Sendable, Hashable {
    /// The topic whose messages were dropped.
    public var topic: Topic
    /// How many were dropped.
    public var count: UInt64
    /// The sequence numbers of the first and last dropped; `count` is smaller than the range when the dropped
    /// messages were not consecutive (some of the range were delivered).
    public var firstSequence: UInt64
    /// The sequence number of the last message dropped (see ``firstSequence``).
    public var lastSequence: UInt64

    /// Creates a notice.
    public init(topic: Topic, count: UInt64, firstSequence: UInt64, lastSequence: UInt64) {
        self.topic = topic
        self.count = count
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
    }

    /// The topic of a notice about many topics at once: a subscriber that fell behind on more topics than the daemon
    /// keeps a notice for each is told how many messages of the others were dropped, without their numbers.
    public static let manyTopics = try! Topic("$notifyd.dropped")

    /// Whether this notice counts messages of many topics (``manyTopics``), whose sequence numbers it does not give.
    public var isAboutManyTopics: Bool { topic == DropNotice.manyTopics }
}
