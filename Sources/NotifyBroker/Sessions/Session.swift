internal import DequeModule
import NotifyProtocol

/// One client connection as the broker sees it: who it is, what it subscribed to, where its frames go.
///
/// Created by ``Broker/open(peer:transport:)`` and owned by the broker's thread, like all broker state; its
/// identity is what the subscription index stores.
public final class Session: Hashable {
    /// A number unique among the broker's sessions, for logs.
    public let id: UInt64
    /// The peer, from the kernel.
    public let peer: PeerCredentials
    /// The identity stamped on this session's publishes (the same for all of them, so it is made once; an importer's
    /// changes with each message it carries in, see ``Broker/openImporter(peer:)``).
    @exclusivity(unchecked) var publisher: Publisher {
        didSet { unitField = publisher.unitField }
    }
    /// The publisher's unit as it goes on the line of each message (``Publisher/unitField``), made when the
    /// publisher is set rather than for each message.
    @exclusivity(unchecked) private(set) var unitField: String
    /// Whether this session carries in messages from another host (``Broker/publishImported(_:through:)``): they are
    /// never exported to the fleet's follower, so nothing goes back where it came from.
    @exclusivity(unchecked) private(set) var isImporter = false
    /// The least sequence number the next publish of this session takes: 0, except while an importer carries in a
    /// message whose origin numbered it further (so a topic published from one host has the same numbers everywhere).
    @exclusivity(unchecked) var minimumSequence: UInt64 = 0
    /// Released when the session closes: a stale subscriber list may still reference the session for a while,
    /// and must not keep the connection's channel alive with it.
    @exclusivity(unchecked) private(set) var transport: (any SessionTransport)? {
        didSet { noteTransportWritability() }
    }
    /// Whether it still has its connection.
    var hasTransport: Bool { transport != nil }

    /// Whether its connection takes frames now (true without one), as its transport last said: asked per request
    /// and per delivery, and a call to the transport costs a retain and a release of it (an existential read from a
    /// class's property is copied for the call, whatever the property's ownership), 5% of a small publish. Kept
    /// current by ``Broker/writabilityChanged(_:)``, which a transport's owner calls whenever `isWritable` changes.
    var transportIsWritable: Bool {
        assert(
            reportedWritable == (transport?.isWritable ?? true),
            "a transport's isWritable changed and Broker.writabilityChanged(_:) was not called"
        )
        return reportedWritable
    }
    @exclusivity(unchecked) private var reportedWritable = true

    /// Reads the transport's writability again (see ``transportIsWritable``).
    func noteTransportWritability() {
        reportedWritable = transport?.isWritable ?? true
    }

    /// The session's subscriptions by pattern; the subscription index holds the other direction.
    @exclusivity(unchecked) var subscriptions = SubscriptionTable()
    /// Frames waiting while the connection's socket cannot take more. Made the first time a frame waits: most
    /// connections never fall behind, and a queue held inline cost every session some 130 bytes.
    var outbox: OutboundQueue {
        _read {
            if let box = outboxBox { yield box.queue } else { yield Session.emptyOutbox }
        }
        _modify {
            if outboxBox == nil { outboxBox = OutboxBox() }
            yield &outboxBox!.queue
        }
    }
    @exclusivity(unchecked) private var outboxBox: OutboxBox?
    /// Whether a live delivery may go straight to its connection as far as the session is concerned: nothing waits
    /// before it, and its deliveries are neither paused nor held for the state log.
    var takesDeliveries: Bool { outboxIsEmpty && !pausesDeliveries && !awaitsCommit }

    /// Whether nothing waits in ``outbox``; asked for every delivery, so without going through a coroutine.
    var outboxIsEmpty: Bool {
        guard let box = outboxBox else { return true }
        return box.queue.isEmpty
    }
    /// Whether replies, or buffered messages asked for, wait in ``outbox`` (they pass paused deliveries).
    var outboxHasFlowingEntries: Bool {
        guard let box = outboxBox else { return false }
        return box.queue.hasFlowingEntries
    }
    /// Whether the session has a queue: not until a frame first waited, or after ``releaseOutbox()``.
    var hasOutboxStorage: Bool { outboxBox != nil }

    /// Lets go of the queue, which must be empty.
    func releaseOutbox() {
        precondition(outboxBox?.queue.isEmpty ?? true, "a queue let go of with frames in it")
        outboxBox = nil
    }
    /// What its connection's write buffer held when last looked at, counted in its account's queued bytes.
    @exclusivity(unchecked) var writeBufferCharge = 0
    /// Requests waiting while the connection's socket cannot take their replies.
    @exclusivity(unchecked) var heldBack = Deque<DecodedRequest>()
    /// Bytes read from the connection and not carried out yet, as last told (see ``Broker/holdUnread(_:for:)``).
    @exclusivity(unchecked) var unreadBytes = 0
    /// The topic this session last published to: a publisher usually sends many messages to one topic, and comparing
    /// its name is cheaper than hashing it to look it up. Dropped when the table forgets the topic.
    @exclusivity(unchecked) var lastPublishedTopic: TopicState?
    /// ``lastPublishedTopic``, not retained: valid while the session holds it.
    var lastPublishedTopicPointer: Unmanaged<TopicState>? {
        guard let topic = lastPublishedTopic else { return nil }
        return Unmanaged.passUnretained(topic)
    }
    /// The configuration generation under which the access rules last let this session publish to
    /// ``lastPublishedTopic``: the same topic again is not asked about until the configuration changes (a reload).
    @exclusivity(unchecked) var lastPublishAllowedGeneration: UInt64 = .max
    /// Whether the session receives its own publishes.
    @exclusivity(unchecked) var receivesOwnMessages = true
    /// Whether an acknowledgement that the state log must back (`OK` of a retained `PUB … ack`, or of a `CLEAR`)
    /// waits in ``outbox`` for the batch's commit, with everything sent to the session after it.
    @exclusivity(unchecked) var awaitsCommit = false
    /// Whether the session is in ``Broker/sessionsAwaitingCommit``, for this batch's commit.
    @exclusivity(unchecked) var inCommitList = false
    /// Whether the session's acknowledgements wait for the state log's sync by a ``StateLogSyncer``: the one
    /// numbered ``awaitedSync``, or a later one.
    @exclusivity(unchecked) var waitsForSync = false
    @exclusivity(unchecked) var awaitedSync: UInt64 = 0
    /// Whether the client paused its deliveries (`OPT pause`): they wait in ``outbox`` under their overflow policy,
    /// as if the socket took nothing, while replies still go out.
    @exclusivity(unchecked) var pausesDeliveries = false
    /// Deliveries dropped since the last ``BrokerEvent/dropped(count:for:)``.
    @exclusivity(unchecked) var droppedSinceReport = 0
    /// Whether frames were queued since the last flush.
    @exclusivity(unchecked) var hasUnflushedFrames = false
    /// This session's run of frames in the broker's ``DeliveryBatch`` not written yet (deliveries, and small replies
    /// and replayed messages), valid while `spanGeneration` is the batch's generation: consecutive frames extend it
    /// and go out as one write.
    @exclusivity(unchecked) var span: Range<Int> = 0..<0
    @exclusivity(unchecked) var spanGeneration: UInt64 = .max
    /// Whether the connection is to be closed once flushed (after an error that loses framing).
    @exclusivity(unchecked) var closesAfterFlush = false
    @exclusivity(unchecked) private(set) var isClosed = false
    /// The last stamp of a subscriber-list computation that counted this session; deduplicates a session that
    /// several of its patterns match.
    @exclusivity(unchecked) var matchStamp: UInt64 = 0
    /// Where this session sits in the list being computed under `matchStamp`.
    @exclusivity(unchecked) var matchPosition = 0

    /// What the peer's uid holds, over all its connections.
    let account: UserAccount

    init(id: UInt64, peer: PeerCredentials, account: UserAccount, transport: any SessionTransport) {
        self.id = id
        self.peer = peer
        self.account = account
        self.publisher = peer.publisher
        self.unitField = peer.publisher.unitField
        self.transport = transport
        reportedWritable = transport.isWritable
    }

    /// Makes this session the one that carries in messages from other hosts.
    func markImporter() {
        isImporter = true
    }

    /// Lets go of the connection, which is gone, while the session is still being closed.
    func detachTransport() {
        transport = nil
    }

    /// Marks the session closed and lets go of its connection.
    func markClosed() {
        isClosed = true
        transport = nil
    }

    /// Whether requests of this session wait for its connection to take replies again; reading more from it
    /// meanwhile would only make the wait longer.
    public var isHoldingBack: Bool { !heldBack.isEmpty }

    /// The number of subscriptions held.
    public var subscriptionCount: Int { subscriptions.count }

    public static func == (lhs: Session, rhs: Session) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    private final class OutboxBox {
        @exclusivity(unchecked) var queue = OutboundQueue()
    }
    /// What ``outbox`` reads as before the session has one.
    nonisolated(unsafe) private static let emptyOutbox = OutboundQueue()
}
