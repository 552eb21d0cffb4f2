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
