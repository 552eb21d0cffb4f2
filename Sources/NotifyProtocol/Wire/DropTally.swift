/// Drops not announced yet, merged into one ``DropNotice`` per topic, in the order first dropped: what the daemon's
/// queue for a connection that fell behind keeps until it can send `DROP`, and what a client subscription at its
/// hard limit keeps until its consumer has room.
///
/// At most ``topicLimit`` topics get a notice of their own; what is dropped of any other is counted in one notice
/// about many topics (``DropNotice/manyTopics``), so a flood over ever new topics costs no more.
package struct DropTally {
    /// The most topics with a notice of their own.
    package static let topicLimit = 1_024

    private var notices: [DropNotice] = []
    private var indexByTopic: [Topic: Int] = [:]
    private var otherTopics: UInt64 = 0

    package init() {}

    package var isEmpty: Bool { notices.isEmpty && otherTopics == 0 }

    /// The topics with a notice of their own, for tests.
    package var topicCount: Int { notices.count }

    /// Counts `count` messages of `topic`, numbered from `first` to `last`, as dropped: merged with what was dropped
    /// of the topic before (they are one run to its subscriber, whatever was delivered in between).
    package mutating func record(_ topic: Topic, count: UInt64, first: UInt64, last: UInt64) {
        // A flood drops one topic again and again: the last notice is the usual one to grow.
        if let index = notices.indices.last, notices[index].topic == topic {
            merge(count, first, last, into: index)
        } else if let index = indexByTopic[topic] {
            merge(count, first, last, into: index)
        } else if topic == DropNotice.manyTopics || notices.count >= DropTally.topicLimit {
            otherTopics = otherTopics.saturatingAdd(count)
        } else {
            indexByTopic[topic] = notices.count
            notices.append(DropNotice(topic: topic, count: count, firstSequence: first, lastSequence: last, reason: .queue))
        }
    }

    /// Counts `notice`'s messages as dropped too.
    package mutating func record(_ notice: DropNotice) {
        record(notice.topic, count: notice.count, first: notice.firstSequence, last: notice.lastSequence)
    }

    /// The notices to send, which it forgets: one per topic, then the one about many topics if any.
    package mutating func take() -> [DropNotice] {
        var taken = notices
        if otherTopics > 0 {
            taken.append(DropNotice(topic: DropNotice.manyTopics, count: otherTopics, firstSequence: 0, lastSequence: 0, reason: .queue))
        }
        notices.removeAll(keepingCapacity: notices.count <= 64)
        indexByTopic.removeAll(keepingCapacity: indexByTopic.count <= 64)
        otherTopics = 0
        return taken
    }

    /// Forgets the notices of the topics `isForgotten` names.
    package mutating func removeAll(where isForgotten: (Topic) -> Bool) {
        guard notices.contains(where: { isForgotten($0.topic) }) else { return }
        notices.removeAll { isForgotten($0.topic) }
        indexByTopic.removeAll()
        for (index, notice) in notices.enumerated() { indexByTopic[notice.topic] = index }
    }

    private mutating func merge(_ count: UInt64, _ first: UInt64, _ last: UInt64, into index: Int) {
        // Counts come from the daemon (a client's tally) or from far-apart sequence numbers: saturating, not trapping.
        notices[index].count = notices[index].count.saturatingAdd(count)
        notices[index].firstSequence = min(notices[index].firstSequence, first)
        notices[index].lastSequence = max(notices[index].lastSequence, last)
    }
}
