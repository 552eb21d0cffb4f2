import NotifyProtocol

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
        /// Its topic, which has a history. Unmanaged: the broker settles before it lets a topic or a history go
        /// (see ``Broker/settleHistory()``), and a reference counted per message is what this type is there to save.
        let topic: Unmanaged<TopicState>
        /// Its frame, in the batch's buffer.
        let frame: Range<Int>
        let sequence: UInt64
        let time: PublishTime
        let payloadSize: Int
        /// Its publisher. Unmanaged: the broker settles before it forgets an account (see
        /// ``Broker/forgetIfEmpty(_:)``).
        let owner: Unmanaged<UserAccount>
        /// The bytes of its frame's line start, which its record leaves out: as the encoder wrote them
        /// (``MessageLineStart``), not measured again.
        let lineStart: UInt16
        var fate = Fate.kept
        /// For the message ``Fate/passed``: the oldest message of its topic in the batch, gone with it.
        var firstGone: UInt64 = 0
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

    /// What ``decide(limits:largestPayload:)`` counted of one topic's messages so far.
    private struct Tally {
        var limits: HistoryLimits
        var count = 0
        var bytes = 0
        /// The index of the message passed, once one is: everything older is gone.
        var passed: Int?
    }

    private(set) var messages: [Message] = []
    /// The tallies of the topics of a decision, by topic; kept for its capacity.
    private var tallies: [UnsafeMutableRawPointer: Tally] = [:]

    var isEmpty: Bool { messages.isEmpty }

    mutating func append(_ message: Message) {
        messages.append(message)
    }

    /// Decides each message's fate, newest first: a topic's history holds its newest messages within `limits` of
    /// it, each no larger than `largestPayload` (what a budget can hold at all); the first that does not fit ends
    /// its topic's run, and everything older than it is gone.
    ///
    /// A burst is mostly runs of one topic: the tally of the current run's topic is kept at hand, and the table of
    /// tallies consulted only when the topic changes.
    mutating func decide(limits: (TopicState) -> HistoryLimits, largestPayload: Int) {
        tallies.removeAll(keepingCapacity: true)
        var current: UnsafeMutableRawPointer?
        var tally = Tally(limits: .off)
        for index in messages.indices.reversed() {
            let message = messages[index]
            let topic = message.topic.toOpaque()
            if topic != current {
                if let current { tallies[current] = tally }
                current = topic
                tally = tallies[topic] ?? Tally(limits: message.topic._withUnsafeGuaranteedRef(limits))
            }
            if let passed = tally.passed {
                messages[index].fate = .superseded
                messages[passed].firstGone = message.sequence
                continue
            }
            // As the history counts it: without the start of the line, which its record leaves out.
            let size = message.frame.count - Int(message.lineStart)
            if tally.count < tally.limits.messages, tally.bytes + size <= tally.limits.bytes, message.payloadSize <= largestPayload {
                tally.count += 1
                tally.bytes += size
            } else {
                tally.passed = index
                messages[index].fate = .passed
                messages[index].firstGone = message.sequence
            }
        }
    }

    mutating func removeAll() {
        messages.removeAll(keepingCapacity: true)
        tallies.removeAll(keepingCapacity: true)
    }

    /// Lets go of the room a burst made (a batch's worth of messages, 80 KiB for a thousand): kept from batch to
    /// batch while the daemon works, given back when it is idle.
    mutating func releaseCapacity() {
        messages = []
        tallies = [:]
    }
}
