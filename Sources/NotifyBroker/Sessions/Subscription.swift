import NotifyProtocol

/// One subscription of a session: a pattern and what to do when the subscriber falls behind. The subscription
/// index stores these, so a topic's subscriber list knows each connection's policy.
final class Subscription: Hashable {
    unowned let session: Session
    let pattern: TopicPattern
    var overflow: OverflowPolicy

    init(session: Session, pattern: TopicPattern, overflow: OverflowPolicy) {
        self.session = session
        self.pattern = pattern
        self.overflow = overflow
    }

    static func == (lhs: Subscription, rhs: Subscription) -> Bool { lhs === rhs }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A connection that receives a topic's messages, with the strictest overflow policy of its matching
/// subscriptions.
struct SubscriberTarget {
    let session: Session
    var overflow: OverflowPolicy
}
