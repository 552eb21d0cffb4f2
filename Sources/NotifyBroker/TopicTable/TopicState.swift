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
    /// ``RetainedMessage``). Nil while the message is only in the history (``retainedInHistory``). Read ``retained``.
    @exclusivity(unchecked) var retainedBlock: RetainedMessage?
    /// The sequence number of the buffered message while it is kept as a record of the history instead of a block
    /// (0 when it is not): a topic with history would otherwise hold its latest message twice, and with one message
    /// each, as most topics of a host have, that second copy was a fifth of a topic's memory. The broker moves it
    /// there when the history takes it in as its batch settles, or is restored with it (``shareRetained(asRecord:)``),
    /// and back into a block before the history lets it go (``HistoryLedger/released(_:from:)``).
    @exclusivity(unchecked) var retainedInHistory: UInt64 = 0
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
    /// ``Broker/dropSubscriberList(of:)``, which counts the lists' entries against their bound.
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
    var hasRetained: Bool { retainedBlock != nil || retainedInHistory != 0 }

    /// Its buffered latest message, wherever it is kept.
    var retained: BufferedMessage? {
        if let retainedBlock { return BufferedMessage(retainedBlock) }
        guard retainedInHistory != 0, let history, let entry = history.entry(sequence: retainedInHistory) else { return nil }
        return BufferedMessage(entry, in: history, of: topic.name)
    }

    /// Lets go of the buffered message's block: the history's record numbered `sequence` is the same message, and
    /// stands for it from now on.
    func shareRetained(asRecord sequence: UInt64) {
        retainedBlock = nil
        retainedInHistory = sequence
    }

    /// Lets go of its buffered message.
    func dropRetained() {
        retainedBlock = nil
        retainedInHistory = 0
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
