import NIOCore
import NotifyProtocol

extension ClientChannelHandler {
    /// A subscription of this client: its patterns and the stream its events go to.
    ///
    /// A class, so that handing an event to it costs one reference, not a copy of all it holds; `@unchecked
    /// Sendable` because it belongs to one connection's event loop at a time, and moves to the next connection's
    /// whole, when the first is lost. For the same reason its fields skip the runtime's exclusivity checks, which
    /// cost a few per cent of a delivery: one thread at a time, and no access to a field while another is under way.
    final class LocalSubscription: @unchecked Sendable {
        let patterns: [TopicPattern]
        /// Where its events go.
        let output: SubscriptionOutput
        /// What it holds for its consumer.
        let gauge: SubscriptionGauge
        /// Its `SUB … latest` requests not answered yet: while there are some, buffered messages may still come.
        @exclusivity(unchecked) var replaysPending = 0
        /// While `replaysPending`, the newest message handed to it per topic, to tell a buffered message it already
        /// has (see ``isRepeat(_:)``); emptied once the last reply is in. Not used by a subscription that resumes,
        /// whose ``ResumeState/delivered`` keeps the same.
        @exclusivity(unchecked) var replayed = DeliveredMessages()
        /// Its patterns whose `SUB … since=` replay is still coming, with how many. A live message of a topic they
        /// match was published before the daemon took that `SUB`, so the replay brings it (or a `DROP` tells of it),
        /// in order: the live copy is left out. (Handed on, it would come before older messages of the replay, which
        /// would then look like repeats and be lost.) It arrives live at all when another subscription of the
        /// connection already holds the pattern.
        @exclusivity(unchecked) var historyReplays: [TopicPattern: Int] = [:]
        /// What it did not keep while at its hard limit, to be announced once it has room.
        @exclusivity(unchecked) var localDrops = DropTally()
        /// For a subscription of a client that reconnects: what it needs to resume on the next connection.
        @exclusivity(unchecked) var resume: ResumeState?
        /// What it was given in the read under way, to be handed over at its end.
        @exclusivity(unchecked) var gathered = SubscriptionInbox.Batch()
        /// Whether it is listed to be handed what it gathered at the end of the read.
        @exclusivity(unchecked) var awaitsHandOver = false
        /// Its id on the connection it is on.
        @exclusivity(unchecked) var id: UInt64 = 0

        init(patterns: [TopicPattern], output: SubscriptionOutput, gauge: SubscriptionGauge) {
            self.patterns = patterns
            self.output = output
            self.gauge = gauge
        }

        /// Whether `delivery` is new to it, noting it as delivered: a subscription that resumed on a new connection is
        /// replayed what it delivered before the old one was lost, which is left out, once.
        func isNewAcrossConnections(_ delivery: Delivery) -> Bool {
            guard resume != nil else { return true }
            if resume!.delivered.isRepeat(delivery) { return false }
            resume!.delivered.record(delivery, isLive: delivery.time >= resume!.connectedAt)
            return true
        }

        /// `notice` less what it delivered before its connection was lost (nil when all of it was).
        func missedAcrossConnections(_ notice: DropNotice) -> DropNotice? {
            guard let resume else { return notice }
            return resume.delivered.missed(notice)
        }

        /// Whether a history replay still coming to it brings the messages of `topic` (see ``historyReplays``).
        func awaitsHistory(of topic: Topic) -> Bool {
            guard !historyReplays.isEmpty else { return false }
            return historyReplays.keys.contains { $0.matches(topic) }
        }

        /// Whether, while buffered messages may still come to it, it already has `delivery` or a newer message of its
        /// topic; else records it as the newest it has. Always false otherwise.
        ///
        /// The daemon sends a connection each live message once, but each `SUB … latest` sends the buffered messages of
        /// the topics its pattern matches: a subscription with overlapping patterns (`x.>` and `x.y`) asks for a topic's
        /// twice, the second time possibly after newer live ones. Sequence numbers only grow per topic, so a repeat is a
        /// message numbered no higher than the newest seen and published no later; a topic the daemon forgot, and numbers
        /// from 1 again, has newer times.
        func isRepeat(_ delivery: Delivery) -> Bool {
            // One that resumes keeps every topic's last delivery anyway (``isNewAcrossConnections(_:)`` tells a repeat
            // from it): one table, not two.
            guard replaysPending > 0, resume == nil else { return false }
            if replayed.isRepeat(delivery) { return true }
            replayed.record(delivery, isLive: false)
            return false
        }
    }

    /// What a subscription of a client that reconnects carries from one connection to the next.
    struct ResumeState {
        /// What it delivered, to leave out the replay of it and to know where to resume.
        var delivered = DeliveredMessages()
        /// Where it first started: a sequence number resumes one topic by number.
        let since: ResumePoint?
        let overflow: OverflowPolicy
        /// When its current connection subscribed: an older message is a replay, which does not move the resume
        /// point.
        var connectedAt: PublishTime
        /// Where the client reaches it, updated on each connection.
        let route: SubscriptionRoute

        /// Where the next connection resumes it.
        func resumePoint(for patterns: [TopicPattern]) -> ResumePoint {
            delivered.resumePoint(for: patterns, startedAt: since)
        }
    }
}
