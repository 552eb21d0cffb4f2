import NotifyBus
import Synchronization

/// A center's observations, and the one queue by which their events reach them: the client hands each event to the
/// queue on its event loop, in the order they arrive on the connection, and one task takes them out and calls the
/// observers, one at a time, in that order.
///
/// The queue is bounded by the observations' gauges: an event counts in its subscription's gauge until it is taken
/// out here, and a full gauge holds the connection back (see ``/NotifyBus/NotifyClient``'s backpressure).
final class ObservationTable: Sendable {
    /// One observer's subscription, and what to do with its events.
    struct Observation {
        let gauge: SubscriptionGauge
        /// Set once the daemon confirmed the subscription.
        var subscription: SubscriptionHandle?
        /// The observer object it was added for, if any.
        let observer: ObjectIdentifier?
        let isAlive: (@Sendable () -> Bool)?
        /// Hands an event on; false when its observer is gone.
        let handle: @Sendable (SubscriptionEvent) async -> Bool
    }

    private struct State {
        var next: UInt64 = 0
        var running: [UInt64: Observation] = [:]
        var delivering: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let arrivals: AsyncStream<(UInt64, SubscriptionEvent)>
    private let arrive: AsyncStream<(UInt64, SubscriptionEvent)>.Continuation

    init() {
        (arrivals, arrive) = AsyncStream.makeStream(of: (UInt64, SubscriptionEvent).self)
    }

    /// Starts the task that takes events out of the queue; it ends with ``close()``.
    func startDelivering() {
        let task = Task { [arrivals, weak self] in
            for await (id, event) in arrivals {
                guard let self else { return }
                await self.deliver(event, to: id)
            }
        }
        state.withLock { $0.delivering = task }
    }

    private func deliver(_ event: SubscriptionEvent, to id: UInt64) async {
        // Stopped meanwhile: what it had in the queue is not handed out.
        guard let observation = state.withLock({ $0.running[id] }) else { return }
        if observation.gauge.take(event.bufferedSize) { observation.subscription?.caughtUp() }
        if await !observation.handle(event) { stop(id) }
    }

    /// Enters an observation before it subscribes, so that events arriving with the daemon's confirmation find it;
    /// returns its number and the sink its subscription feeds.
    func prepare(
        gauge: SubscriptionGauge,
        observer: ObjectIdentifier?,
        isAlive: (@Sendable () -> Bool)?,
        handle: @escaping @Sendable (SubscriptionEvent) async -> Bool
    ) -> (UInt64, @Sendable (SubscriptionEvent) -> Void) {
        let id = state.withLock { state in
            state.next += 1
            state.running[state.next] = Observation(gauge: gauge, subscription: nil, observer: observer, isAlive: isAlive, handle: handle)
            return state.next
        }
        let arrive = self.arrive
        return (id, { arrive.yield((id, $0)) })
    }

    /// Notes that observation `id`'s subscription is confirmed; one stopped meanwhile ends it at once.
    func started(_ id: UInt64, _ subscription: SubscriptionHandle) {
        let running = state.withLock { state in
            guard state.running[id] != nil else { return false }
            state.running[id]!.subscription = subscription
            return true
        }
        guard running else { return subscription.end() }
        // Events taken before the handle was here could not say that the consumer caught up.
        subscription.caughtUp()
    }

    /// Ends observation `id`; returns whether it was running.
    @discardableResult
    func stop(_ id: UInt64) -> Bool {
        guard let observation = state.withLock({ $0.running.removeValue(forKey: id) }) else { return false }
        observation.subscription?.end()
        return true
    }

    /// Ends the observations of `observer`; returns whether it had any.
    func stop(observer: ObjectIdentifier) -> Bool {
        let stopped = state.withLock { state in
            let ids = state.running.filter { $0.value.observer == observer }.map(\.key)
            return ids.compactMap { state.running.removeValue(forKey: $0) }
        }
        for observation in stopped { observation.subscription?.end() }
        return !stopped.isEmpty
    }

    /// Ends the observations of observer objects that were deallocated.
    func sweep() {
        let dead = state.withLock { state in
            let ids = state.running.filter { $0.value.isAlive?() == false }.map(\.key)
            return ids.compactMap { state.running.removeValue(forKey: $0) }
        }
        for observation in dead { observation.subscription?.end() }
    }

    var count: Int { state.withLock { $0.running.count } }

    /// Ends every observation and the queue.
    func close() {
        let (all, task) = state.withLock { state in
            defer { state.running.removeAll() }
            return (Array(state.running.values), state.delivering)
        }
        for observation in all { observation.subscription?.end() }
        arrive.finish()
        task?.cancel()
    }
}
