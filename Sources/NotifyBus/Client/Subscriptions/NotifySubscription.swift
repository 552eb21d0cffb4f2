import Synchronization
import NotifyProtocol

/// What a subscription receives: a message, or the notice that messages were dropped because the subscriber fell
/// behind.
public enum SubscriptionEvent: Sendable, Hashable {
    /// A message published to a matching topic.
    case message(Delivery)
    /// Messages of a matching topic were dropped for this connection (see ``/NotifyProtocol/OverflowPolicy``).
    case dropped(DropNotice)
}

/// An iterator of subscription events that hands over what is already there without waiting: a consumer that
/// writes what it takes (`notify subscribe`) takes the first event with `next()`, then what is at hand with this,
/// with no suspension point per event, and writes it all once.
package protocol EventsAtHand: AsyncIteratorProtocol where Element == SubscriptionEvent {
    /// The next event if it is there already; nil when taking one would wait (or the subscription ended: `next()`
    /// says which).
    mutating func nextAtHand() -> SubscriptionEvent?
}

/// The events of a subscription, as they come: `for try await event in subscription`.
///
/// The client holds at most ``SubscriptionBufferLimits`` of them for a consumer that is slower than the publishers;
/// past that, the daemon keeps the rest under the subscription's ``/NotifyProtocol/OverflowPolicy``, and what it drops arrives as
/// ``SubscriptionEvent/dropped(_:)`` in its place among the messages.
///
/// What one read of the connection brings is handed to the consumer at once, and its iterator goes through that
/// batch without waiting or locking: iterating costs about as much per message as the loop's own body allows. The
/// subscription ends when it is no longer iterated (its last copy and iterator are let go of, or the iterating task
/// is cancelled); the daemon is told.
public struct NotifySubscription: AsyncSequence, Sendable {
    /// What the sequence yields.
    public typealias Element = SubscriptionEvent

    let inbox: SubscriptionInbox
    let gauge: SubscriptionGauge
    /// Ends the subscription at the connection once nobody iterates it.
    package let consumer: Consumer

    init(inbox: SubscriptionInbox, gauge: SubscriptionGauge, handle: SubscriptionHandle) {
        self.inbox = inbox
        self.gauge = gauge
        self.consumer = Consumer(handle: handle)
    }

    /// An iterator over the sequence.
    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: self)
    }

    /// Takes the events one by one, a hand-over at a time.
    public struct Iterator: AsyncIteratorProtocol, EventsAtHand {
        private let subscription: NotifySubscription
        private var batch = SubscriptionInbox.Batch()
        private var index = 0

        init(subscription: NotifySubscription) {
            self.subscription = subscription
        }

        /// The next event; `for try await` calls it on its caller's executor (the main actor, say): an event of the
        /// batch at hand is returned there at once, without a hop to the global executor and back.
        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(any Error) -> SubscriptionEvent? {
            try await next()
        }

        /// The next element, on the caller's executor: nil at the end.
        public nonisolated(nonsending) mutating func next() async throws -> SubscriptionEvent? {
            if let event = nextAtHand() { return event }
            do {
                guard let next = try await subscription.inbox.take() else {
                    subscription.consumer.stop()
                    return nil
                }
                batch = next
            } catch {
                subscription.consumer.stop()
                throw error
            }
            index = 1
            return batch.events[0]
        }

        /// The next event of the batch at hand, or of what the connection added since; nil when there is none yet.
        /// `notify subscribe` writes its output once this is nil.
        package mutating func nextAtHand() -> SubscriptionEvent? {
            if index < batch.events.count {
                defer { index += 1 }
                return batch.takeEvent(at: index)
            }
            // The batch is done with: it no longer counts against the limits.
            if !batch.events.isEmpty {
                if subscription.gauge.take(events: batch.events.count, bytes: batch.bytes) { subscription.consumer.handle.caughtUp() }
                batch = SubscriptionInbox.Batch()
            }
            guard let next = subscription.inbox.takeWaiting() else { return nil }
            batch = next
            index = 1
            return batch.takeEvent(at: 0)
        }
    }

    /// How many events wait for the consumer now (those of the batch its iterator is going through included), and
    /// their size in bytes as counted against ``SubscriptionBufferLimits``.
    public var buffered: (events: Int, bytes: Int) { gauge.held }

    /// Only the messages, for callers that do not care what was dropped.
    public var messages: some AsyncSequence<Delivery, any Error> {
        compactMap { event in
            if case .message(let delivery) = event { return delivery }
            return nil
        }
    }

    /// Ends the subscription at the connection once, when its consumer is done: at the end of the events, or when
    /// the subscription and its iterators are let go of.
    package final class Consumer: Sendable {
        let handle: SubscriptionHandle
        private let stopped = Atomic(false)

        init(handle: SubscriptionHandle) {
            self.handle = handle
        }

        package func stop() {
            guard !stopped.exchange(true, ordering: .relaxed) else { return }
            handle.end()
        }

        deinit { stop() }
    }
}
