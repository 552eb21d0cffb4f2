import NotifyProtocol

/// Where a subscription's events go: the inbox of a ``NotifySubscription``, or a function that takes them in the
/// order they arrive on the connection (``NotifyClient/subscribe(to:latestFirst:gauge:sink:finished:)``).
///
/// For an inbox, the connection gathers what one read of the socket brought the subscription and hands it over
/// once, at the end of the read: one lock and one wake-up of the consumer per read, not per message. A function
/// takes each event at once instead: the subscriptions of one client that each have one then see their events in
/// the order they came on the connection, across subscriptions (NotifyCenter's observers rely on it).
enum SubscriptionOutput: Sendable {
    case inbox(SubscriptionInbox)
    /// `yield` takes each event; `finish` is called when the subscription ends, with nil when it ends normally.
    case sink(yield: @Sendable (SubscriptionEvent) -> Void, finish: @Sendable ((any Error)?) -> Void)

    /// Ends the subscription for its consumer, after what it was handed: with nil when it ends normally, else with
    /// why.
    func finish(_ error: (any Error)?) {
        switch self {
        case .inbox(let inbox): inbox.finish(error)
        case .sink(_, let finish): finish(error)
        }
    }
}

/// What ends a subscription made with a sink, and tells the connection its consumer caught up.
package struct SubscriptionHandle: Sendable {
    /// Tells the connection that the consumer took the subscription back under its low-water marks.
    package let caughtUp: @Sendable () -> Void
    /// Ends the subscription (the daemon is told when no other subscription of the client holds its patterns).
    package let end: @Sendable () -> Void
}
