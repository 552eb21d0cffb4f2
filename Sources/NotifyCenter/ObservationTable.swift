internal import DequeModule
import NotifyBus
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A center's observations, and the one queue by which their events reach them: the client hands each event to the
/// queue on its event loop, in the order they arrive on the connection, and one task takes them out and calls the
/// observers, one at a time, in that order.
///
/// The queue is bounded by the observations' gauges: an event counts in its subscription's gauge until it is taken
/// out here, and a full gauge holds the connection back (see ``/NotifyBus/NotifyClient``'s backpressure).
///
/// It also keeps what makes a center's own posts reach the right observers: which observer posted a message
/// (``NotifyCenter/post(_:retain:from:)``) is known only when the daemon acknowledges it, after the daemon already
/// sent it back; a message of this process on a topic with such a post under way is held here, with whatever comes
/// after it, until the post is settled (the acknowledgement is next on the connection).
final class ObservationTable: Sendable {
    /// One observer's subscription, and what to do with its events.
    struct Observation {
        let gauge: SubscriptionGauge
        /// Set once the daemon confirmed the subscription.
        var subscription: SubscriptionHandle?
        /// The observer object (or owner) it was added for, if any.
        let observer: ObjectIdentifier?
        /// What it follows: where a message sent again (`sendLatest`) goes.
        let pattern: TopicPattern
        let isAlive: (@Sendable () -> Bool)?
        /// Runs when it ends: what it holds besides (a queue of its own) goes too.
        let onStop: (@Sendable () -> Void)?
        /// Hands an event on; false when its observer is gone.
        let handle: @Sendable (SubscriptionEvent) async -> Bool

        func end() {
            subscription?.end()
            onStop?()
        }
    }

    /// What posted a message: an observation (by its token) or an observer object.
    enum PostSender: Hashable {
        case observation(UInt64)
        case object(ObjectIdentifier)
    }

    /// What comes through the queue, in order.
    enum Arrival: Sendable {
        /// An event of observation `id`'s subscription, counted in its gauge.
        case event(UInt64, SubscriptionEvent)
        /// A message sent again to every observation whose pattern it matches (`sendLatest`).
        case resend(Delivery)
        /// Something to call for observation `id` in its place in the order (its initial value); false ends it.
        case call(UInt64, @Sendable () async -> Bool)
        /// A post with a sender was settled: what was held for it may go on.
        case settled
    }

    private struct OwnPost: Hashable {
        let topic: Topic
        let sequence: UInt64
    }

    private struct State {
        var next: UInt64 = 0
        var running: [UInt64: Observation] = [:]
        var delivering: Task<Void, Never>?
        /// Posts with a sender that the daemon has not acknowledged yet, by topic.
        var postsInFlight: [Topic: Int] = [:]
        /// Who posted which of this center's messages, the latest ``OwnPosts/capacity``.
        var postedBy: [OwnPost: PostSender] = [:]
        var postOrder = Deque<OwnPost>()
        /// Topics with a `sendLatest` under way, and the newest number an observer was handed of each since.
        var resending: [Topic: (count: Int, newest: UInt64)] = [:]
    }

    private static let processID = getpid()
    /// How many `sendLatest` calls are under way: while none is, a message of another process needs no lock.
    private let resendsUnderWay = Atomic<Int>(0)

    private let state = Mutex(State())
    private let arrivals: AsyncStream<Arrival>
    private let arrive: AsyncStream<Arrival>.Continuation

    init() {
        (arrivals, arrive) = AsyncStream.makeStream(of: Arrival.self)
    }

    /// Starts the task that takes events out of the queue; it ends with ``close()``.
    func startDelivering() {
        let task = Task { [arrivals, weak self] in
            var held = Deque<Arrival>()
            for await arrival in arrivals {
                guard let self else { return }
                if held.isEmpty, !self.mustHold(arrival) {
                    await self.deliver(arrival, counted: false)
                    continue
                }
                self.count(arrival)
                held.append(arrival)
                while let first = held.first, !self.mustHold(first) {
                    held.removeFirst()
                    await self.deliver(first, counted: true)
                }
            }
        }
        state.withLock { $0.delivering = task }
    }

    /// Counts an event out of its gauge as it is taken from the queue to be held: the connection must not be held
    /// back for it, as the acknowledgement it waits for must still be read.
    private func count(_ arrival: Arrival) {
        guard case .event(let id, let event) = arrival,
            let observation = state.withLock({ $0.running[id] })
        else { return }
        take(event, from: observation)
    }

    private func take(_ event: SubscriptionEvent, from observation: Observation) {
        if observation.gauge.take(event.bufferedSize) { observation.subscription?.caughtUp() }
    }

    /// Whether `arrival` must wait for a post under way: a message of this process on its topic.
    private func mustHold(_ arrival: Arrival) -> Bool {
        guard case .event(_, .message(let delivery)) = arrival,
            delivery.publisher.host == nil, delivery.publisher.pid == ObservationTable.processID
        else { return false }
        return state.withLock { $0.postsInFlight[delivery.topic] != nil }
    }

    /// Hands `arrival` on; `counted`: its event was counted out of its gauge already.
    private func deliver(_ arrival: Arrival, counted: Bool) async {
        switch arrival {
        case .event(let id, let event):
            // Stopped meanwhile: what it had in the queue is not handed out.
            guard let observation = state.withLock({ $0.running[id] }) else { return }
            if !counted { take(event, from: observation) }
            if case .message(let delivery) = event, !isFor(delivery, id: id, observation) { return }
            if await !observation.handle(event) { stop(id) }
        case .resend(let delivery):
            // A newer message reached the observers while it was asked for: the older is not sent after it.
            guard resendDone(for: delivery.topic) <= delivery.sequence else { return }
            let targets = state.withLock { state in
                state.running.filter { $0.value.pattern.matches(delivery.topic) }.sorted { $0.key < $1.key }
            }
            for (id, observation) in targets where isFor(delivery, id: id, observation) {
                guard state.withLock({ $0.running[id] != nil }) else { continue }
                if await !observation.handle(.message(delivery)) { stop(id) }
            }
        case .call(let id, let call):
            guard state.withLock({ $0.running[id] != nil }) else { return }
            if await !call() { stop(id) }
        case .settled:
            break
        }
    }

    /// Whether `delivery` goes to observation `id`: not when it posted it itself. Notes the newest number handed out
    /// of a topic being sent again, whoever posted it.
    private func isFor(_ delivery: Delivery, id: UInt64, _ observation: Observation) -> Bool {
        let isOwnProcess = delivery.publisher.host == nil && delivery.publisher.pid == ObservationTable.processID
        guard isOwnProcess || resendsUnderWay.load(ordering: .acquiring) > 0 else { return true }
        return state.withLock { state in
            if state.resending[delivery.topic] != nil {
                state.resending[delivery.topic]!.newest = max(state.resending[delivery.topic]!.newest, delivery.sequence)
            }
            guard isOwnProcess else { return true }
            switch state.postedBy[OwnPost(topic: delivery.topic, sequence: delivery.sequence)] {
            case .observation(let poster)?: return poster != id
            case .object(let poster)?: return poster != observation.observer
            case nil: return true
            }
        }
    }

    // MARK: - Posts with a sender

    /// Notes a post of `sender`'s about to go to `topic`: messages of this process on it wait until it is settled,
    /// by the returned settlement (once: the reply as the event loop reads it, or the post's failure).
    func postStarting(to topic: Topic, by sender: PostSender) -> PostSettlement {
        state.withLock { $0.postsInFlight[topic, default: 0] += 1 }
        return PostSettlement { [weak self] sequence in self?.postSettled(to: topic, sequence: sequence, by: sender) }
    }

    /// Notes that the post to `topic` got its number (nil: it failed), and who posted it.
    private func postSettled(to topic: Topic, sequence: UInt64?, by sender: PostSender) {
        state.withLock { state in
            if let count = state.postsInFlight[topic], count > 1 {
                state.postsInFlight[topic] = count - 1
            } else {
                state.postsInFlight[topic] = nil
            }
            guard let sequence else { return }
            let post = OwnPost(topic: topic, sequence: sequence)
            guard state.postedBy.updateValue(sender, forKey: post) == nil else { return }
            state.postOrder.append(post)
            if state.postOrder.count > OwnPosts.capacity, let oldest = state.postOrder.popFirst() {
                state.postedBy[oldest] = nil
            }
        }
        arrive.yield(.settled)
    }

    /// Who `sender` is to this table: an observation of it (a token it gave) or an object.
    func sender(_ sender: AnyObject) -> PostSender {
        if let token = sender as? ObservationToken, token.issuer == ObjectIdentifier(self) { return .observation(token.tag) }
        return .object(ObjectIdentifier(sender))
    }

    // MARK: - Sending the latest again

    /// Notes that the latest of `topic` is about to be asked for, to be sent again: from now on, the newest of the
    /// topic handed to an observer is noted, so that an older one is not sent after it.
    func resendStarting(for topic: Topic) {
        resendsUnderWay.add(1, ordering: .releasing)
        state.withLock { state in
            let current = state.resending[topic]
            state.resending[topic] = ((current?.count ?? 0) + 1, current?.newest ?? 0)
        }
    }

    /// Sends `delivery` again to the observations of its topic, in its place in the order; nil: there was none.
    func resend(_ delivery: Delivery?, for topic: Topic) {
        guard let delivery else {
            resendDone(for: topic)
            return
        }
        arrive.yield(.resend(delivery))
    }

    /// Notes that a `sendLatest` of `topic` is done; returns the newest number handed out of the topic meanwhile.
    @discardableResult
    private func resendDone(for topic: Topic) -> UInt64 {
        defer { resendsUnderWay.subtract(1, ordering: .releasing) }
        return state.withLock { state in
            let current = state.resending[topic]
            if let current, current.count > 1 {
                state.resending[topic]!.count -= 1
            } else {
                state.resending[topic] = nil
            }
            return current?.newest ?? 0
        }
    }

    // MARK: - Observations

    /// Enters an observation before it subscribes, so that events arriving with the daemon's confirmation find it;
    /// returns its number and the sink its subscription feeds.
    func prepare(
        gauge: SubscriptionGauge,
        pattern: TopicPattern,
        observer: ObjectIdentifier?,
        isAlive: (@Sendable () -> Bool)?,
        onStop: (@Sendable () -> Void)?,
        handle: @escaping @Sendable (SubscriptionEvent) async -> Bool
    ) -> (UInt64, @Sendable (SubscriptionEvent) -> Void) {
        let id = state.withLock { state in
            state.next += 1
            state.running[state.next] = Observation(
                gauge: gauge,
                subscription: nil,
                observer: observer,
                pattern: pattern,
                isAlive: isAlive,
                onStop: onStop,
                handle: handle
            )
            return state.next
        }
        let arrive = self.arrive
        return (id, { arrive.yield(.event(id, $0)) })
    }

    /// Queues `call` for observation `id`, after what its subscription brought so far.
    func enqueue(_ call: @escaping @Sendable () async -> Bool, for id: UInt64) {
        arrive.yield(.call(id, call))
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
        observation.end()
        return true
    }

    /// Ends the observations of `observer`; returns whether it had any.
    func stop(observer: ObjectIdentifier) -> Bool {
        let stopped = state.withLock { state in
            let ids = state.running.filter { $0.value.observer == observer }.map(\.key)
            return ids.compactMap { state.running.removeValue(forKey: $0) }
        }
        for observation in stopped { observation.end() }
        return !stopped.isEmpty
    }

    /// Ends the observations of observer objects that were deallocated.
    func sweep() {
        let dead = state.withLock { state in
            let ids = state.running.filter { $0.value.isAlive?() == false }.map(\.key)
            return ids.compactMap { state.running.removeValue(forKey: $0) }
        }
        for observation in dead { observation.end() }
    }

    var count: Int { state.withLock { $0.running.count } }

    /// Ends every observation and the queue.
    func close() {
        let (all, task) = state.withLock { state in
            defer { state.running.removeAll() }
            return (Array(state.running.values), state.delivering)
        }
        for observation in all { observation.end() }
        arrive.finish()
        task?.cancel()
    }
}

/// Settles a post with a sender once: with its number from the daemon's reply, read on the event loop (so that what
/// waits for it does not wait for the poster's executor, a busy main actor say), or without one when it failed.
final class PostSettlement: Sendable {
    private let done = Atomic<Bool>(false)
    private let action: @Sendable (UInt64?) -> Void

    init(_ action: @escaping @Sendable (UInt64?) -> Void) {
        self.action = action
    }

    func settle(_ sequence: UInt64?) {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        action(sequence)
    }
}
