/// The messages a batch published to topics that keep history, not in their histories yet.
///
/// A history keeps a topic's last messages; a burst of a thousand publishes to one topic in one batch would have
/// it take in, copy and count each of them only to let most go again before the batch ends. Instead the broker notes
/// each message here (its frame stays where it was encoded, in the batch's buffer) and, before anything reads a
/// history and before the batch's buffer starts over, settles them: ``decide(limits:largestPayload:)`` picks, newest
/// first, the messages each history will still hold, and only those are copied in. The others are only noted as
/// gone, so a resume is told of them exactly as if each had come and gone. Owned by the broker's thread.
struct PendingHistory {
    /// One message published in the batch.
    struct Message {
        /// Its topic. Not retained: the broker settles before it lets a topic go (see ``Broker/settleHistory()``).
        unowned(unsafe) let topic: TopicState
        /// Its frame, in the batch's buffer.
        let frame: Range<Int>
        let sequence: UInt64
        let time: PublishTime
        let payloadSize: Int
        /// Its publisher. Not retained: the broker settles before it forgets an account (see
        /// ``Broker/forgetIfEmpty(_:)``).
        unowned(unsafe) let owner: UserAccount
        var fate = Fate.kept
    }

    /// What becomes of a message once the batch's messages to its topic are all in.
    enum Fate: UInt8 {
        /// Its history keeps it.
        case kept
        /// The newest message of its topic the history will not hold: with it, everything before it is gone.
        case passed
        /// Older still: gone with the one ``passed``.
        case superseded
    }

    private(set) var messages: [Message] = []
    /// How many times ``decide(limits:largestPayload:)`` ran: the stamp of its counts in each topic.
    private var decisions: UInt64 = 0

    var isEmpty: Bool { messages.isEmpty }

    mutating func append(_ message: Message) {
        messages.append(message)
    }

    /// Decides each message's fate, newest first: a topic's history holds its newest messages within `limits` of
    /// it, each no larger than `largestPayload` (what a budget can hold at all); the first that does not fit ends
    /// its topic's run, and everything older than it is gone.
    mutating func decide(limits: (TopicState) -> HistoryLimits, largestPayload: Int) {
        // Each decision starts every topic's counts afresh: a topic's counts are this decision's once its stamp is.
        decisions &+= 1
        let stamp = decisions
        var lastTopic: TopicState?
        var topicLimits = HistoryLimits.off
        for index in messages.indices.reversed() {
            let message = messages[index]
            let topic = message.topic
            if topic !== lastTopic {
                lastTopic = topic
                topicLimits = limits(topic)
                if topic.pendingHistoryStamp != stamp {
                    topic.pendingHistoryStamp = stamp
                    topic.pendingHistoryCount = 0
                    topic.pendingHistoryBytes = 0
                    topic.pendingHistoryIsClosed = false
                }
            }
            if topic.pendingHistoryIsClosed {
                messages[index].fate = .superseded
                continue
            }
            let size = message.frame.count
            if topic.pendingHistoryCount < topicLimits.messages, topic.pendingHistoryBytes + size <= topicLimits.bytes,
                message.payloadSize <= largestPayload
            {
                topic.pendingHistoryCount += 1
                topic.pendingHistoryBytes += size
            } else {
                topic.pendingHistoryIsClosed = true
                messages[index].fate = .passed
            }
        }
    }

    mutating func removeAll() {
        messages.removeAll(keepingCapacity: true)
    }
}
