/// What a subscription at its hard limit did not keep, because its connection had to read on to get a reply that
/// someone waits for: per topic, in the order first dropped. Its consumer is told as the daemon would tell it, with
/// drop notices in their place, as soon as the subscription has room again.
struct LocalDrops {
    /// The most topics it keeps a notice for; what it drops of any other is counted in one notice about many topics
    /// (``DropNotice/manyTopics``), as the daemon does, so it stays bounded however many topics a flood spans.
    static let topicLimit = 1_024

    private(set) var notices: [DropNotice] = []
    private var indexByTopic: [Topic: Int] = [:]
    private var otherTopics: UInt64 = 0

    var isEmpty: Bool { notices.isEmpty && otherTopics == 0 }

    /// Records `event` as dropped: a message, or a notice of the daemon's, which is merged with what was dropped of
    /// its topic here (it came in between, so together they are one run).
    mutating func record(_ event: SubscriptionEvent) {
        let (topic, count, first, last): (Topic, UInt64, UInt64, UInt64)
        switch event {
        case .message(let delivery):
            (topic, count, first, last) = (delivery.topic, 1, delivery.sequence, delivery.sequence)
        case .dropped(let notice):
            (topic, count, first, last) = (notice.topic, notice.count, notice.firstSequence, notice.lastSequence)
        }
        if let index = indexByTopic[topic] {
            notices[index].count += count
            notices[index].firstSequence = min(notices[index].firstSequence, first)
            notices[index].lastSequence = max(notices[index].lastSequence, last)
        } else if topic == DropNotice.manyTopics || notices.count >= LocalDrops.topicLimit {
            otherTopics += count
        } else {
            indexByTopic[topic] = notices.count
            notices.append(DropNotice(topic: topic, count: count, firstSequence: first, lastSequence: last))
        }
    }

    /// The notices, which it forgets.
    mutating func take() -> [DropNotice] {
        var taken = notices
        if otherTopics > 0 {
            taken.append(DropNotice(topic: DropNotice.manyTopics, count: otherTopics, firstSequence: 0, lastSequence: 0))
        }
        notices.removeAll()
        indexByTopic.removeAll()
        otherTopics = 0
        return taken
    }
}
