/// One frame from the server, as read from or written to the wire (see PROTOCOL.md).
public enum ServerFrame: Sendable, Hashable {
    /// The greeting sent once on connect.
    case hello(ServerGreeting)
    /// Success; `value` is the sequence number for an acknowledged publish, absent otherwise.
    case ok(requestID: UInt64?, value: UInt64?)
    /// The answer to `PING`.
    case pong(requestID: UInt64?)
    /// A refused request.
    case error(ProtocolError)
    /// A message for one of the connection's subscriptions (`MSG`).
    case delivery(Delivery)
    /// The buffered message of a topic, answering `LATEST` (`LAST`).
    case latest(requestID: UInt64?, Delivery)
    /// The known topics, answering `TOPICS`.
    case topics(requestID: UInt64?, [TopicInfo])
    /// The daemon's counters, answering `STATS`.
    case stats(requestID: UInt64?, ServerStats)
    /// Which rules decide a topic's access, answering `EXPLAIN`.
    case explanation(requestID: UInt64?, AccessExplanation)
    /// Messages of a topic were dropped because this subscriber fell behind (`DROP`).
    case dropped(DropNotice)
    /// Messages of a topic that a resuming subscription (`SUB … since=`, the request `requestID`) asked for and the
    /// topic's history no longer holds (`#<id> DROP`; protocol 3).
    case missed(requestID: UInt64, DropNotice)
    /// A publish or clear of this host's, to the fleet service that follows them (`EXP`; protocol 5).
    case export(FleetExport)
}

/// What the server says about itself on connect.
public struct ServerGreeting: Sendable, Hashable {
    /// The protocol version this library speaks: 2 adds `OPT pause` and `OPT resume` (flow control of deliveries),
    /// 3 adds `SUB … since=` (resuming from a topic's history), 4 names the origin host of a message from another
    /// host in its unit field (`<host>/<unit>`, federation), 5 the fleet service's requests (`FOLLOW`, `IMPORT`,
    /// `MISSED`, `FLEETSTATS`, for the daemon's fleet user only) and its `EXP` frames.
    public static let currentVersion: UInt64 = 5
    /// The first version whose servers understand `OPT pause` and `OPT resume`.
    public static let pausingVersion: UInt64 = 2
    /// The first version whose servers keep history and understand `SUB … since=`.
    public static let resumingVersion: UInt64 = 3

    /// The server's name, `notifyd`.
    public var server: String
    /// The protocol version.
    public var version: UInt64
    /// The sizes the server accepts.
    public var limits: ProtocolLimits

    /// Creates a greeting.
    public init(server: String = "notifyd", version: UInt64 = ServerGreeting.currentVersion, limits: ProtocolLimits) {
        self.server = server
        self.version = version
        self.limits = limits
    }
}

/// One line of a `TOPICS` reply: what the daemon knows about a topic.
public struct TopicInfo: Sendable, Hashable {
    /// The topic.
    public var topic: Topic
    /// Its last sequence number.
    public var sequence: UInt64
    /// The size of its buffered message, or nil when nothing is buffered.
    public var retainedBytes: Int?
    /// Messages published to it since the daemon started.
    public var published: UInt64
    /// Deliveries of its messages since the daemon started.
    public var delivered: UInt64
    /// When its last message was published.
    public var lastPublished: PublishTime?
    /// Deliveries of its messages dropped for subscribers that fell behind, since the daemon started.
    public var dropped: UInt64

    /// Creates a topic description.
    public init(
        topic: Topic,
        sequence: UInt64,
        retainedBytes: Int?,
        published: UInt64,
        delivered: UInt64,
        lastPublished: PublishTime?,
        dropped: UInt64 = 0
    ) {
        self.topic = topic
        self.sequence = sequence
        self.retainedBytes = retainedBytes
        self.published = published
        self.delivered = delivered
        self.lastPublished = lastPublished
        self.dropped = dropped
    }
}

/// The daemon's counters, in the order the server sent them.
public struct ServerStats: Sendable, Hashable {
    /// One named counter.
    public struct Counter: Sendable, Hashable {
        /// The counter's name, such as `connections` (PROTOCOL.md lists them).
        public var name: String
        /// Its value.
        public var value: UInt64

        /// Creates a counter.
        public init(name: String, value: UInt64) {
            self.name = name
            self.value = value
        }
    }

    /// The counters, in the server's order.
    public var counters: [Counter]

    /// Creates a set of counters.
    public init(counters: [Counter]) {
        self.counters = counters
    }

    /// The value of the counter called `name`, if the server sent it.
    public subscript(name: String) -> UInt64? {
        counters.first { $0.name == name }?.value
    }
}

/// The answer to `EXPLAIN`: for one uid and topic, whether each access is allowed and the rule that decides it.
public struct AccessExplanation: Sendable, Hashable {
    /// One access and its decision.
    public struct Decision: Sendable, Hashable {
        /// `publish` or `read`.
        public var access: String
        /// Whether the uid may do it.
        public var isAllowed: Bool
        /// The deciding rule, as a sentence.
        public var rule: String

        /// Creates a decision, as the daemon's answer says it.
        public init(access: String, isAllowed: Bool, rule: String) {
            self.access = access
            self.isAllowed = isAllowed
            self.rule = rule
        }
    }

    /// The uid the decisions are for.
    public var uid: UInt32
    /// One decision per access asked about: publishing, then reading.
    public var decisions: [Decision]

    /// Creates an answer, as the daemon's `EXPLAIN` reply says it.
    public init(uid: UInt32, decisions: [Decision]) {
        self.uid = uid
        self.decisions = decisions
    }
}
