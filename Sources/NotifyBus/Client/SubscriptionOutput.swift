/// Where a subscription's events go: the stream of a ``NotifySubscription``, or a function that takes them in the
/// order they arrive on the connection (``NotifyClient/subscribe(to:latestFirst:gauge:sink:finished:)``).
struct SubscriptionOutput: Sendable {
    let yield: @Sendable (SubscriptionEvent) -> Void
    /// Called when the subscription ends: with nil when it ends normally, else with why.
    let finish: @Sendable ((any Error)?) -> Void

    init(yield: @escaping @Sendable (SubscriptionEvent) -> Void, finish: @escaping @Sendable ((any Error)?) -> Void) {
        self.yield = yield
        self.finish = finish
    }

    init(_ continuation: AsyncThrowingStream<SubscriptionEvent, any Error>.Continuation) {
        yield = { continuation.yield($0) }
        finish = { error in
            if let error { continuation.finish(throwing: error) } else { continuation.finish() }
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
