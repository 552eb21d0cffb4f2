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

/// Messages of one topic that a subscriber does not get (`DROP`): dropped because it fell behind, or, for a
/// subscription that resumes, no longer held where the daemon keeps them; ``reason`` says which.
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
    /// Which bound dropped them; nil when the daemon did not say (one older than this library).
    public var reason: DropReason?

    /// Creates a notice.
    public init(topic: Topic, count: UInt64, firstSequence: UInt64, lastSequence: UInt64, reason: DropReason? = nil) {
        self.topic = topic
        self.count = count
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.reason = reason
    }

    /// The topic of a notice about many topics at once: a subscriber that fell behind on more topics than the daemon
    /// keeps a notice for each is told how many messages of the others were dropped, without their numbers.
    public static let manyTopics = try! Topic("$notifyd.dropped")

    /// Whether this notice counts messages of many topics (``manyTopics``), whose sequence numbers it does not give.
    public var isAboutManyTopics: Bool { topic == DropNotice.manyTopics }
}

/// Which bound dropped the messages of a ``DropNotice`` (`reason=` on a `DROP` line). Open to values a newer daemon
/// may send, as ``ErrorCode`` is.
public struct DropReason: RawRepresentable, Sendable, Hashable {
    /// The word on the line, such as `history`.
    public var rawValue: String

    /// A reason by its word on the line.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The subscriber fell behind: its queue in the daemon, under its overflow policy, had no room for them.
    public static let queue = DropReason(rawValue: "queue")
    /// A subscription resumed from before what the topic's history holds: they left it to make room.
    public static let history = DropReason(rawValue: "history")
    /// The daemon forgot their topic to make room for others (`max-topics`), or lost its state.
    public static let forgotten = DropReason(rawValue: "forgotten")
    /// Other hosts' messages lost before this host took them in: older than the fleet's log keeps, or never handed
    /// over by the fleet service.
    public static let fleet = DropReason(rawValue: "fleet")
    /// Never on the wire: a NotifyCenter observer with a queue of its own in the client (one on the main actor, or
    /// an `async` handler) fell behind, and its bounded queue had no room for them.
    public static let observer = DropReason(rawValue: "observer")
}
