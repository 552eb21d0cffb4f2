import NIOCore
import NotifyProtocol

/// What the broker keeps per topic: its sequence, its buffered message, its counters, and who listens to it.
final class TopicState {
    // The fields are laid out as declared; they are ordered, and sized, so that a topic's state fits the 144-byte
    // malloc size class (a topic costs what its state, buffered message and table entry cost: see README,
    // "Per retained message").
    let topic: Topic
    /// The last sequence number given out; the next message gets one more.
    @exclusivity(unchecked) var sequence: UInt64 = 0
    /// The buffered latest message in a block of its own, kept as the `MSG` frame that delivered it: replaying it to
    /// a new subscriber costs no encoding, and the frame is a tight copy that does not pin a receive buffer (see
    /// ``RetainedMessage``). Only for a topic without history, or a message its history does not hold
    /// (``retainedRecord``). Read it through ``Broker/retained(of:)``.
    @exclusivity(unchecked) private(set) var retainedBlock: RetainedMessage?
    /// Where the buffered message is when it is a record of the history instead of a block: "retained" is then a
    /// mark on that record, and the message is held once and logged once (a second copy was a fifth of a topic's
    /// memory, with one message each, as most topics of a host have). 0 when it is not; the record's sequence
    /// number (``retainedInHistory``); or, while the record still waits in the batch to be taken into the history,
    /// ``pendingTag`` and its index among ``Broker/pendingHistory``'s messages (``pendingRetained``). One word for
    /// both, as a sequence number never reaches bit 63 (``StateLog/largestSequence``): a field more would put the
    /// state in the next malloc size class. A publish to a topic with history puts its message there, as does a
    /// restart; it moves into a block when the history does not take it or lets it go
    /// (``HistoryLedger/released(_:from:)``).
    @exclusivity(unchecked) private var retainedRecord: UInt64 = 0
    @exclusivity(unchecked) var published: UInt64 = 0
    @exclusivity(unchecked) var delivered: UInt64 = 0
    /// Deliveries dropped for subscribers that fell behind.
    @exclusivity(unchecked) var dropped: UInt64 = 0
    /// When its last message was published, in microseconds since the epoch; 0 before any (since a restart).
    @exclusivity(unchecked) private var lastPublishedMicroseconds: UInt64 = 0
    /// The sequence number the state log guarantees this topic will not go below after a restart.
    @exclusivity(unchecked) var persistedSequence: UInt64 = 0
    /// Whether the buffered message changed since the state log last recorded it.
    @exclusivity(unchecked) var isUnsaved = false
    /// Whether the topic is in the broker's list of topics it may forget: there at most once, so that clearing a
    /// topic again and again does not grow the list.
    @exclusivity(unchecked) var isListedForgettable = false
    /// Whether the table let go of it: a session's cached last topic (``Session/lastPublishedTopic``) is then stale.
    @exclusivity(unchecked) var isForgotten = false
    /// Whether its history kept messages since the state log last recorded it (it is then in the broker's list of
    /// histories to log).
    @exclusivity(unchecked) var historyIsUnlogged = false
    /// Its position in its group of ``TopicGroups``.
    @exclusivity(unchecked) var groupSlot: Int32 = 0
    /// Which of the configuration's history rules applies to it (its index, or -1 for the default limits), as of
    /// the configuration of generation `historyRuleGeneration`.
    @exclusivity(unchecked) var historyRule: Int32 = -1
    @exclusivity(unchecked) var historyRuleGeneration: UInt32 = .max
    /// Its last messages, once it has any and keeps history.
    @exclusivity(unchecked) var history: TopicHistory?

    /// The sessions that receive this topic's messages, each once; valid while `subscribersGeneration` equals the
    /// broker's wildcard generation and `invalidateSubscribers` was not called since.
    @exclusivity(unchecked) var subscribers: [SubscriberTarget] = []
    @exclusivity(unchecked) var subscribersGeneration: UInt64 = .max

    /// Forgets the subscriber list, and the sessions it holds, until the next publish recomputes it. Called through
    /// ``SubscriberRouting/dropList(of:)``, which counts the lists' entries against their bound.
    func invalidateSubscribers() {
        subscribers = []
        subscribersGeneration = .max
    }

    init(topic: Topic) {
        self.topic = topic
    }

    /// ``retainedBlock``, not retained: valid until the block is replaced or let go of.
    var retainedBlockPointer: Unmanaged<RetainedMessage>? {
        guard let retainedBlock else { return nil }
        return Unmanaged.passUnretained(retainedBlock)
    }

    /// Whether it buffers a latest message.
    var hasRetained: Bool { retainedBlock != nil || retainedRecord != 0 }

    private static let pendingTag: UInt64 = 1 << 63

    /// The sequence number of the history's record that is its buffered message, once in the history; else 0.
    var retainedInHistory: UInt64 { retainedRecord & TopicState.pendingTag == 0 ? retainedRecord : 0 }

    /// The index of its buffered message among the broker's pending history (``Broker/pendingHistory``), while the
    /// message waits there to be taken into the history.
    var pendingRetained: Int? {
        retainedRecord & TopicState.pendingTag == 0 ? nil : Int(truncatingIfNeeded: retainedRecord & ~TopicState.pendingTag)
    }

    /// Its buffered latest message, wherever it is kept, once its batch settled (the broker reads it through
    /// ``Broker/retained(of:)``, which settles it first).
    var retained: BufferedMessage? {
        assert(pendingRetained == nil, "a buffered message read before its batch settled")
        if let retainedBlock { return BufferedMessage(retainedBlock) }
        guard retainedInHistory != 0, let history, let entry = history.entry(sequence: retainedInHistory) else { return nil }
        return BufferedMessage(entry, in: history, of: topic.name)
    }

    /// Makes the history's record numbered `sequence` its buffered message, letting go of any block.
    func retainInHistory(_ sequence: UInt64) {
        assert(sequence & TopicState.pendingTag == 0, "a sequence number past bit 62")
        retainedBlock = nil
        retainedRecord = sequence
    }

    /// Makes the message at `index` of the broker's pending history its buffered message, letting go of any block:
    /// it is the history's record once the batch settles.
    func retainPending(at index: Int) {
        retainedBlock = nil
        retainedRecord = TopicState.pendingTag | UInt64(truncatingIfNeeded: index)
    }

    /// Keeps its buffered message in `block`, not in the history.
    func retainInBlock(_ block: RetainedMessage) {
        retainedBlock = block
        retainedRecord = 0
    }

    /// Lets go of its buffered message.
    func dropRetained() {
        retainedBlock = nil
        retainedRecord = 0
    }

    /// When its last message was published, if one was since the daemon started or its log recorded one.
    var lastPublished: PublishTime? {
        get { lastPublishedMicroseconds == 0 ? nil : PublishTime(microsecondsSinceEpoch: lastPublishedMicroseconds) }
        set { lastPublishedMicroseconds = newValue?.microsecondsSinceEpoch ?? 0 }
    }

    var info: TopicInfo {
        TopicInfo(
            topic: topic,
            sequence: sequence,
            retainedBytes: retained?.payloadSize,
            published: published,
            delivered: delivered,
            lastPublished: lastPublished,
            dropped: dropped
        )
    }
}
