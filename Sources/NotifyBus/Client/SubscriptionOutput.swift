/// Where a subscription's events go: the stream of a ``NotifySubscription``, or a function that takes them in the
/// order they arrive on the connection (``NotifyClient/subscribe(to:latestFirst:gauge:sink:finished:)``).
///
/// For a stream, the connection gathers what one read of the socket brought the subscription and hands it over once,
/// at the end of the read: one lock and one wake-up of the consumer per read, not per message. A function takes
/// each event at once instead: the subscriptions of one client that each have one then see their events in the
/// order they came on the connection, across subscriptions (NotifyCenter's observers rely on it).
struct SubscriptionOutput: Sendable {
    /// Takes each event as it is routed, when the output takes them one at a time; nil when it takes batches.
    let takeEach: (@Sendable (SubscriptionEvent) -> Void)?
    /// Takes the events of one read, in order, with their size as counted against the limits.
    let handOver: @Sendable (SubscriptionInbox.Batch) -> Void
    /// Called when the subscription ends, after its last events: with nil when it ends normally, else with why.
    let finish: @Sendable ((any Error)?) -> Void

    init(yield: @escaping @Sendable (SubscriptionEvent) -> Void, finish: @escaping @Sendable ((any Error)?) -> Void) {
        takeEach = yield
        handOver = { batch in
            for event in batch.events { yield(event) }
        }
        self.finish = finish
    }

    init(_ inbox: SubscriptionInbox) {
        takeEach = nil
        handOver = { inbox.append($0) }
        finish = { inbox.finish($0) }
    }

    init(_ continuation: AsyncThrowingStream<SubscriptionEvent, any Error>.Continuation) {
        takeEach = { continuation.yield($0) }
        handOver = { batch in
            for event in batch.events { continuation.yield(event) }
        }
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
