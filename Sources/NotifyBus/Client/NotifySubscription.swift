/// What a subscription receives: a message, or the notice that messages were dropped because the subscriber fell
/// behind.
public enum SubscriptionEvent: Sendable, Hashable {
    /// A message published to a matching topic.
    case message(Delivery)
    /// Messages of a matching topic were dropped for this connection (see ``OverflowPolicy``).
    case dropped(DropNotice)
}

/// The events of a subscription, as they come: `for try await event in subscription`.
///
/// The client holds at most ``SubscriptionBufferLimits`` of them for a consumer that is slower than the publishers;
/// past that, the daemon keeps the rest under the subscription's ``OverflowPolicy``, and what it drops arrives as
/// ``SubscriptionEvent/dropped(_:)`` in its place among the messages.
public struct NotifySubscription: AsyncSequence, Sendable {
    public typealias Element = SubscriptionEvent

    let stream: AsyncThrowingStream<SubscriptionEvent, any Error>
    let gauge: SubscriptionGauge
    /// Tells the connection that the consumer caught up, so deliveries may flow again.
    let caughtUp: @Sendable () -> Void

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), gauge: gauge, caughtUp: caughtUp)
    }

    /// Takes the events one by one, counting each out of what the subscription holds.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<SubscriptionEvent, any Error>.Iterator
        let gauge: SubscriptionGauge
        let caughtUp: @Sendable () -> Void

        public mutating func next() async throws -> SubscriptionEvent? {
            guard let event = try await base.next() else { return nil }
            if gauge.take(event.bufferedSize) { caughtUp() }
            return event
        }
    }

    /// How many events wait for the consumer now, and their size in bytes as counted against
    /// ``SubscriptionBufferLimits``.
    public var buffered: (events: Int, bytes: Int) { gauge.held }

    /// Only the messages, for callers that do not care what was dropped.
    public var messages: some AsyncSequence<Delivery, any Error> {
        compactMap { event in
            if case .message(let delivery) = event { return delivery }
            return nil
        }
    }
}
