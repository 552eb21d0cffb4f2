import NotifyProtocol

/// What a ``ResumingSubscription`` delivered: the last message of each topic, by sequence number and time, so that
/// the replay after a reconnect is not delivered twice and a drop notice names only what was really missed; and
/// where to resume.
///
/// Bounded: it resumes by time, after the newest live message delivered, and the daemon replays only messages
/// published after that point. A topic whose last delivered message is older cannot be replayed twice, so its entry
/// is let go of once the table has grown (after a subscription to `>` has seen a million topics, say): what it keeps
/// is about the topics of the last moment, not every topic it ever saw.
struct DeliveredMessages {
    private var last: [Topic: (sequence: UInt64, time: PublishTime)] = [:]
    /// The last message of the topic delivered most recently, kept out of `last` until another topic comes: a topic's
    /// messages usually come in runs, and the decoder hands the same name again, so this costs no hashing.
    private var recent: (topic: Topic, sequence: UInt64, time: PublishTime)?
    /// The table's size at which it is pruned next.
    private var pruneAt = DeliveredMessages.minimumPruneSize
    static let minimumPruneSize = 1_024

    /// Where to resume: after the newest live message delivered, or where the subscription started.
    var resumePoint: PublishTime?

    /// Notes where the subscription starts: resuming starts from there (the time asked for, else `now`) while nothing
    /// live has come.
    mutating func start(at since: ResumePoint?, now: PublishTime) {
        if case .time(let time) = since { resumePoint = time } else { resumePoint = now }
    }

    /// Where a new connection resumes a subscription of `patterns` that first started at `since`: after the last
    /// number delivered, for one topic asked for by number; else after the resume point, less a microsecond, so
    /// that messages of other topics stamped in the same microsecond are not skipped (their repeats are recognized).
    func resumePoint(for patterns: [TopicPattern], startedAt since: ResumePoint?) -> ResumePoint {
        if case .sequence(let first) = since, patterns.count == 1, let topic = try? Topic(patterns[0].text) {
            return .sequence(max(first, lastSequence(of: topic) ?? first))
        }
        let point = resumePoint?.microsecondsSinceEpoch ?? 0
        return .time(PublishTime(microsecondsSinceEpoch: point > 0 ? point - 1 : 0))
    }

    /// Topics it remembers, for tests.
    var count: Int { last.count + (recent.map { last[$0.topic] == nil ? 1 : 0 } ?? 0) }

    /// The last message delivered of `topic`, if it remembers one.
    private func lastDelivered(of topic: Topic) -> (sequence: UInt64, time: PublishTime)? {
        if let recent, recent.topic == topic { return (recent.sequence, recent.time) }
        return last[topic]
    }

    /// The last sequence number delivered of `topic`, if it remembers one.
    func lastSequence(of topic: Topic) -> UInt64? { lastDelivered(of: topic)?.sequence }

    /// Whether `delivery` was delivered already: a message no newer by both its number and its time than the last of
    /// its topic (a topic numbered again from 1 has newer times, and goes on).
    func isRepeat(_ delivery: Delivery) -> Bool {
        guard let previous = lastDelivered(of: delivery.topic) else { return false }
        return delivery.sequence <= previous.sequence && delivery.time <= previous.time
    }

    /// Notes `delivery` as delivered; `isLive` when it came after the connection subscribed (a replay may stop
    /// half-way if the connection does, so it does not move the resume point).
    mutating func record(_ delivery: Delivery, isLive: Bool) {
        if let previous = recent, previous.topic != delivery.topic {
            last[previous.topic] = (previous.sequence, previous.time)
        }
        recent = (delivery.topic, delivery.sequence, delivery.time)
        if isLive, delivery.time > resumePoint ?? PublishTime(microsecondsSinceEpoch: 0) { resumePoint = delivery.time }
        if last.count >= pruneAt { prune() }
    }

    /// `notice` less what was delivered already; nil when all of it was.
    func missed(_ notice: DropNotice) -> DropNotice? {
        let delivered = lastDelivered(of: notice.topic)?.sequence ?? 0
        guard notice.isAboutManyTopics || notice.lastSequence > delivered else { return nil }
        if notice.isAboutManyTopics || notice.firstSequence > delivered { return notice }
        let first = delivered + 1
        return DropNotice(
            topic: notice.topic,
            count: min(notice.count, notice.lastSequence - first + 1),
            firstSequence: first,
            lastSequence: notice.lastSequence,
            reason: notice.reason
        )
    }

    /// Lets go of the topics whose last message is older than the resume point: the replay sends none of theirs that
    /// was delivered already.
    private mutating func prune() {
        if let recent { last[recent.topic] = (recent.sequence, recent.time) }
        if let resumePoint { last = last.filter { $0.value.time >= resumePoint } }
        pruneAt = max(DeliveredMessages.minimumPruneSize, 2 * last.count)
    }
}
