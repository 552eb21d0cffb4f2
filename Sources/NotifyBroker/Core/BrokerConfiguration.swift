public import NotifyProtocol

/// The limits a broker enforces. Each one, when reached, gets the client a `limit` error and affects nobody else.
public struct BrokerConfiguration: Sendable, Hashable {
    /// Sizes of frames, announced in the greeting.
    public var protocolLimits: ProtocolLimits
    /// The most subscriptions one connection may hold.
    public var maxSubscriptionsPerConnection: Int
    /// The most topics the broker keeps track of. Past it, topics with no buffered message and no subscriber by name
    /// are forgotten, oldest first, with their history; as many forgotten topics are remembered by name and number
    /// (``ForgottenTopics``), so a resume of one is told what it missed and the topic, made again, numbers on. If
    /// every topic holds a buffered message or has a subscriber by name, publishing to a new topic is refused.
    public var maxTopics: Int
    /// The most deliveries in the queue of a connection that does not keep up; past it, its subscriptions'
    /// overflow policy applies.
    public var maxQueuedMessages: Int
    /// The most bytes waiting for a connection that does not keep up: half of it in the connection's write buffer,
    /// as sent (see ``writeBufferBytes``), the other half in its queue, where the overflow policy applies.
    public var maxQueuedBytes: Int
    /// The most connections open at once; one more is answered `ERR limit` and closed.
    public var maxConnections: Int
    /// The most connections one user (uid) may have open at once, so one user cannot take all of them.
    public var maxConnectionsPerUser: Int
    /// The most payload bytes of buffered messages, over all topics; a retained publish past it is refused.
    public var maxRetainedBytes: Int
    /// The most subscriptions one user (uid) may hold over all its connections.
    public var maxSubscriptionsPerUser: Int = 100_000
    /// The most payload bytes of buffered messages one user (uid) may have published (each message counts against
    /// the uid that published it, until it is replaced or cleared).
    public var maxRetainedBytesPerUser: Int = 64 << 20
    /// The most topics whose buffered message one user (uid) published: well below ``maxTopics``, so that one user's
    /// buffered messages (0-byte ones cost no bytes) cannot fill the topic table for everyone.
    public var maxRetainedTopicsPerUser: Int = 100_000
    /// The most bytes waiting in the queues of one user's (uid's) connections together: past it, a delivery to one
    /// of them makes room by its subscription's overflow policy as if that connection's own queue were full. Without
    /// it, a uid's stalled connections could each hold ``maxQueuedBytes``.
    public var maxQueuedBytesPerUser: Int = 256 << 20
    /// The most bytes waiting in the queues of all connections together, likewise.
    public var maxQueuedBytesTotal: Int = 1 << 30
    /// The most bytes read from one user's (uid's) connections and not carried out yet (frames that did not finish,
    /// a payload on its way): past it, the connection that goes over is closed with `ERR limit`. Without it, a uid's
    /// connections could each hold a line and a `max-payload` unfinished.
    public var maxUnreadBytesPerUser: Int = 64 << 20
    /// The same, over all connections.
    public var maxUnreadBytesTotal: Int = 256 << 20
    /// The most tokens of a wildcard pattern: each may cost a node of the subscription index's trie (a pattern without
    /// wildcards costs one hash entry, whatever its length).
    public var maxWildcardTokens = 32
    /// The most tokens of the wildcard patterns one user (uid) subscribes to, over its subscriptions: the trie nodes
    /// it can make the daemon keep.
    public var maxWildcardTokensPerUser = 262_144
    /// The most entries in the topics' cached subscriber lists together (one per topic and session it goes to,
    /// 16 bytes each), give or take the list just made: past it, the stale lists are let go, then if need be every
    /// list but that one, each made again at its topic's next publish. Without it, wildcard subscribers times topics
    /// published to is memory the daemon keeps: 400 connections subscribed to `>` and 10,000 topics took 98 MiB.
    public var maxCachedSubscriberEntries = 262_144
    /// The uid of the fleet service (`notifyd-fleet`), the only one whose connections may follow this host's
    /// publishes and publish other hosts' messages here (protocol 5); nil: no fleet.
    public var fleetUID: UInt32?
    /// Who may publish to and read which topics.
    public var accessPolicy: AccessPolicy = .default
    /// How much history each topic keeps, unless a rule of ``historyRules`` says otherwise. Its payload bytes count
    /// against the publisher's ``maxRetainedBytesPerUser`` and the daemon's ``maxRetainedBytes``, apart from the
    /// buffered messages: past either, the oldest history leaves (history never makes a publish fail).
    ///
    /// ``HistoryLimits/resumable`` by default (64 messages, 64 KiB): what a subscriber needs to resume across a
    /// restart, for about a tenth of the throughput of small messages (README, Performance).
    public var history = HistoryLimits.resumable
    /// History limits for some topics: the first rule whose pattern matches a topic decides.
    public var historyRules: [HistoryRule] = []

    /// The history limits of `topic`.
    public func historyLimits(of topic: Topic) -> HistoryLimits {
        historyLimits(rule: historyRule(of: topic))
    }

    /// The limits of the history rule numbered `rule` (from ``historyRule(of:)``); the default limits for -1, or for a
    /// number these rules do not have.
    func historyLimits(rule: Int32) -> HistoryLimits {
        historyRules.indices.contains(Int(rule)) ? historyRules[Int(rule)].limits : history
    }

    /// The index of the first of ``historyRules`` that matches `topic`, or -1 when none does.
    func historyRule(of topic: Topic) -> Int32 {
        Int32(historyRules.firstIndex { $0.pattern.matches(topic) } ?? -1)
    }

    /// 1 MiB payloads, 10,000 subscriptions per connection and 100,000 per user, one million topics, 64 MiB waiting
    /// per connection (of which at most 100,000 messages in its queue), 16,384 connections of which 4,096 per user,
    /// 256 MiB of buffered payloads of which 64 MiB per user, 1 GiB queued for connections that fall behind of which
    /// 256 MiB per user.
    public static let `default` = BrokerConfiguration(
        protocolLimits: .default,
        maxSubscriptionsPerConnection: 10_000,
        maxTopics: 1_000_000,
        maxQueuedMessages: 100_000,
        maxQueuedBytes: 64 << 20,
        maxConnections: 16_384,
        maxConnectionsPerUser: 4_096,
        maxRetainedBytes: 256 << 20
    )

    /// Creates a configuration.
    public init(
        protocolLimits: ProtocolLimits,
        maxSubscriptionsPerConnection: Int,
        maxTopics: Int,
        maxQueuedMessages: Int = BrokerConfiguration.default.maxQueuedMessages,
        maxQueuedBytes: Int = BrokerConfiguration.default.maxQueuedBytes,
        maxConnections: Int = BrokerConfiguration.default.maxConnections,
        maxConnectionsPerUser: Int = BrokerConfiguration.default.maxConnectionsPerUser,
        maxRetainedBytes: Int = BrokerConfiguration.default.maxRetainedBytes
    ) {
        self.protocolLimits = protocolLimits
        self.maxSubscriptionsPerConnection = maxSubscriptionsPerConnection
        self.maxTopics = max(1, maxTopics)
        self.maxQueuedMessages = max(1, maxQueuedMessages)
        self.maxQueuedBytes = max(1, maxQueuedBytes)
        self.maxConnections = max(1, maxConnections)
        self.maxConnectionsPerUser = max(1, maxConnectionsPerUser)
        self.maxRetainedBytes = max(0, maxRetainedBytes)
    }

    /// How much a connection's write buffer holds before the connection counts as not keeping up (the high-water
    /// mark of its channel). Frames there are slices of the batches they were sent in, shared by every subscriber
    /// of the same messages, so a subscriber a few megabytes behind costs nothing extra and loses nothing.
    public var writeBufferBytes: Int { max(1, maxQueuedBytes / 2) }

    var queueLimits: OutboundQueue.Limits {
        OutboundQueue.Limits(messages: maxQueuedMessages, bytes: max(1, maxQueuedBytes - writeBufferBytes))
    }
}
