import NIOCore

/// What the broker keeps per topic: its sequence, its buffered message, its counters, and who listens to it.
final class TopicState {
    let topic: Topic
    /// The last sequence number given out; the next message gets one more.
    @exclusivity(unchecked) var sequence: UInt64 = 0
    /// The buffered latest message, kept as the `MSG` frame that delivered it: replaying it to a new subscriber
    /// costs no encoding, and the frame is a tight copy that does not pin a receive buffer (see ``RetainedMessage``).
    @exclusivity(unchecked) var retained: RetainedMessage?
    @exclusivity(unchecked) var published: UInt64 = 0
    @exclusivity(unchecked) var delivered: UInt64 = 0
    /// Deliveries dropped for subscribers that fell behind.
    @exclusivity(unchecked) var dropped: UInt64 = 0
    @exclusivity(unchecked) var lastPublished: PublishTime?
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
    /// Its last messages, once it has any and keeps history.
    @exclusivity(unchecked) var history: TopicHistory?
    /// Its history limits, as of the configuration of generation `historyLimitsGeneration`.
    @exclusivity(unchecked) var historyLimits = HistoryLimits.off
    @exclusivity(unchecked) var historyLimitsGeneration: UInt64 = .max
    /// Its position in its group of ``TopicGroups``.
    @exclusivity(unchecked) var groupSlot = 0

    /// The sessions that receive this topic's messages, each once; valid while `subscribersGeneration` equals the
    /// broker's wildcard generation and `invalidateSubscribers` was not called since.
    @exclusivity(unchecked) var subscribers: [SubscriberTarget] = []
    @exclusivity(unchecked) var subscribersGeneration: UInt64 = .max

    /// Forgets the subscriber list, and the sessions it holds, until the next publish recomputes it.
    func invalidateSubscribers() {
        subscribers = []
        subscribersGeneration = .max
    }

    init(topic: Topic) {
        self.topic = topic
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
