import NotifyBus

/// What `subscription` delivers until `done` says it is all, within a deadline: a message that never comes fails the
/// test that waited for it, naming what it waited for, instead of hanging the run.
func deliveries(
    of subscription: NotifySubscription,
    waitingFor what: String,
    within timeout: Duration = .seconds(60),
    until done: @escaping @Sendable ([Delivery]) -> Bool
) async throws -> [Delivery] {
    try await withDeadline(timeout, waitingFor: what) {
        var received: [Delivery] = []
        for try await delivery in subscription.messages {
            received.append(delivery)
            if done(received) { return received }
        }
        throw TestFailure("the subscription ended before \(what); it had \(received.count) messages")
    }
}

/// A subscription's messages one at a time, each `next` with a deadline that says what it waited for. A test's
/// waits come one after another, so one task at a time uses it; `@unchecked` because the iterator moves into the
/// deadline's task for each call.
final class TimedMessages: @unchecked Sendable {
    private var events: NotifySubscription.Iterator

    init(_ subscription: NotifySubscription) {
        events = subscription.makeAsyncIterator()
    }

    /// The next message, nil when the subscription ended; fails when none comes within `timeout`.
    func next(waitingFor what: String, within timeout: Duration = .seconds(60)) async throws -> Delivery? {
        try await withDeadline(timeout, waitingFor: what) {
            while let event = try await self.events.next() {
                if case .message(let delivery) = event { return delivery }
            }
            return nil
        }
    }

    /// The next event, message or not, nil when the subscription ended; fails when none comes within `timeout`.
    func nextEvent(waitingFor what: String, within timeout: Duration = .seconds(60)) async throws -> SubscriptionEvent? {
        try await withDeadline(timeout, waitingFor: what) { try await self.events.next() }
    }
}
