/// What a subscription at its hard limit did not keep, because its connection had to read on to get a reply that
/// someone waits for: per topic, in the order first dropped. Its consumer is told as the daemon would tell it, with
/// drop notices in their place, as soon as the subscription has room again.
struct LocalDrops {
    /// The most topics it keeps notices for; past it the connection stops reading even for a reply, so what it
    /// keeps stays bounded however many topics a flood spans.
    static let topicLimit = 1_024

    private(set) var notices: [DropNotice] = []
    private var indexByTopic: [Topic: Int] = [:]

    var isEmpty: Bool { notices.isEmpty }
    var isFull: Bool { notices.count >= LocalDrops.topicLimit }

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
        } else {
            indexByTopic[topic] = notices.count
            notices.append(DropNotice(topic: topic, count: count, firstSequence: first, lastSequence: last))
        }
    }

    /// The notices, which it forgets.
    mutating func take() -> [DropNotice] {
        defer {
            notices.removeAll()
            indexByTopic.removeAll()
        }
        return notices
    }
}
