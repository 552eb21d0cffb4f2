/// Where a subscription's events go: the stream of a ``NotifySubscription``, or a function that takes them in the
/// order they arrive on the connection (``NotifyClient/subscribe(to:latestFirst:gauge:sink:finished:)``).
struct SubscriptionOutput: Sendable {
    /// Takes an event and its size (``SubscriptionEvent/bufferedSize``).
    let yield: @Sendable (SubscriptionEvent, Int) -> Void
    /// Called at the end of a read of the socket that yielded events: what the read brought is all there.
    let handOver: @Sendable () -> Void
    /// Called when the subscription ends: with nil when it ends normally, else with why.
    let finish: @Sendable ((any Error)?) -> Void

    init(yield: @escaping @Sendable (SubscriptionEvent) -> Void, finish: @escaping @Sendable ((any Error)?) -> Void) {
        self.yield = { event, _ in yield(event) }
        self.handOver = {}
        self.finish = finish
    }

    init(_ inbox: SubscriptionInbox) {
        yield = { inbox.append($0, size: $1) }
        handOver = { inbox.handOver() }
        finish = { inbox.finish($0) }
    }

    init(_ continuation: AsyncThrowingStream<SubscriptionEvent, any Error>.Continuation) {
        yield = { event, _ in continuation.yield(event) }
        handOver = {}
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
