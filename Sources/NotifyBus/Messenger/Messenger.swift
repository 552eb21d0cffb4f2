internal import DequeModule
import Synchronization

/// A thread-safe, in-process notification center for one kind of message: the Observer/Messenger pattern that
/// notifyd offers across processes, for use inside one.
///
/// ```swift
/// let status = Messenger<String>()
/// let token = status.observe { print("backup:", $0) }
/// status.send("done")          // prints "backup: done"
/// status.latest                // "done"
/// ```
///
/// Observers are objects conforming to ``MessengerObserver``, held weakly, or closures kept registered by an
/// ``ObservationToken``. Either kind can select the messages it wants with a predicate or a value to compare with.
///
/// ## Delivery
/// - Observers are called one at a time, never concurrently, and every observer sees the messages in the same
///   order: the order in which the `send` calls happened.
/// - `send` delivers on the calling thread before it returns, unless a delivery is already under way (a `send`
///   from inside an observer, or a concurrent `send` on another thread). Then the message is queued, and the thread
///   that is delivering hands it out right after the current one. This is what lets an observer send, add and
///   remove observers while it is being called, without deadlock and without anyone seeing messages out of order.
/// - An observer receives exactly the messages sent after it was added and before it was removed.
///
/// ## Removal
/// ``remove(_:)`` takes effect at once: a message whose delivery is under way does not reach the removed observer
/// any more. ``dispose(_:)`` only marks the observer; it is not called again, and its registration is dropped before
/// the next message goes out, which makes it the cheap choice from inside an observer or a deinitializer.
/// A closure observer stops when its token is cancelled or deallocated, an object observer when the object is
/// deallocated.
public final class Messenger<Message: Sendable>: Sendable {
    private struct Pending {
        let message: Message
        let sequence: UInt64
        let excluded: ObjectIdentifier?
    }

    private struct State {
        /// Registrations in the order they were added.
        var registrations: [ObserverRegistration<Message>] = []
        /// Messages sent but not yet handed out, oldest first.
        var queue = Deque<Pending>()
        /// Whether some thread is handing out the queue right now.
        var isDelivering = false
        /// The sequence number of the last message sent; registrations remember it to skip older messages.
        var lastSequence: UInt64 = 0
        /// Set when a registration was disposed or found dead; the list is swept before the next message.
        var needsSweep = false
        /// When the list reaches this length, registering sweeps it first: observers that die while nothing is sent
        /// must not pile up. Doubling it after each sweep keeps registering O(1) amortized.
        var sweepOnRegisterAt = 16
        var latest: Message?
        var buffersLatest: Bool
    }

    private let state: Mutex<State>

    /// Creates a messenger.
    /// - Parameter buffersLatest: whether the last message sent is kept and readable as ``latest`` (the default).
    public init(buffersLatest: Bool = true) {
        state = Mutex(State(buffersLatest: buffersLatest))
    }

    deinit {
        let registrations = state.withLock { $0.registrations }
        for registration in registrations { registration.onMessengerGone?() }
    }

    // MARK: - Observer objects

    /// Registers `observer`, held weakly, for every message sent from now on.
    public func add<Observer: MessengerObserver>(_ observer: Observer) where Observer.Message == Message {
        add(observer, filter: nil)
    }

    /// Registers `observer`, held weakly, for the messages sent from now on for which `isIncluded` returns true.
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        where isIncluded: @escaping @Sendable (Message) -> Bool
    ) where Observer.Message == Message {
        add(observer, filter: isIncluded)
    }

    /// Registers `observer`, held weakly, for the messages sent from now on that equal `value`.
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        equalTo value: Message
    ) where Observer.Message == Message, Message: Equatable {
        add(observer, filter: { $0 == value })
    }

    private func add<Observer: MessengerObserver>(
        _ observer: Observer,
        filter: (@Sendable (Message) -> Bool)?
    ) where Observer.Message == Message {
        register(
            identity: ObjectIdentifier(observer),
            filter: filter,
            observerExists: { [weak observer] in observer != nil }
        ) { [weak observer] message in
            guard let observer else { return false }
            observer.receive(message)
            return true
        }
    }

    /// Removes every registration of `observer` (an observer object or an ``ObservationToken``), at once.
    ///
    /// After `remove` returns, no delivery on this thread or started later calls the observer again; a call
    /// already running on another thread finishes.
    /// - Returns: whether anything was registered for `observer`.
    @discardableResult
    public func remove(_ observer: AnyObject) -> Bool {
        let identity = ObjectIdentifier(observer)
        return state.withLock { state in
            let before = state.registrations.count
            state.registrations.removeAll { registration in
                guard registration.identity == identity else { return false }
                registration.state.store(.removed, ordering: .releasing)
                return true
            }
            return state.registrations.count != before
        }
    }

    /// Marks every registration of `observer` as disposed: it is not called again, and it is dropped from the list
    /// before the next message is sent.
    public func dispose(_ observer: AnyObject) {
        let identity = ObjectIdentifier(observer)
        state.withLock { state in
            for registration in state.registrations where registration.identity == identity {
                registration.state.store(.disposed, ordering: .releasing)
                state.needsSweep = true
            }
        }
    }

    // MARK: - Closure observers

    /// Calls `handler` with every message sent from now on, until the returned token is cancelled or deallocated.
    public func observe(_ handler: @escaping @Sendable (Message) -> Void) -> ObservationToken {
        observe(filter: nil, handler)
    }

    /// Calls `handler` with the messages sent from now on for which `isIncluded` returns true, until the returned
    /// token is cancelled or deallocated.
    public func observe(
        where isIncluded: @escaping @Sendable (Message) -> Bool,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken {
        observe(filter: isIncluded, handler)
    }

    /// Calls `handler` with the messages sent from now on that equal `value`, until the returned token is cancelled
    /// or deallocated.
    public func observe(
        equalTo value: Message,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken where Message: Equatable {
        observe(filter: { $0 == value }, handler)
    }

    private func observe(
        filter: (@Sendable (Message) -> Bool)?,
        onMessengerGone: (@Sendable () -> Void)? = nil,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken {
        let token = ObservationToken()
        let registration = register(identity: ObjectIdentifier(token), filter: filter, onMessengerGone: onMessengerGone) {
            handler($0)
            return true
        }
        token.arm { [weak self] in self?.unregister(registration) }
        return token
    }

    // MARK: - Sending

    /// Sends `message` to every observer registered now (see "Delivery" above for when it reaches them).
    public func send(_ message: Message) {
        enqueue(message, excluding: nil)
    }

    /// Sends `message` to every observer except `sender` (an observer object or an ``ObservationToken``): the
    /// sender is not notified of its own message.
    public func send(_ message: Message, from sender: AnyObject) {
        enqueue(message, excluding: ObjectIdentifier(sender))
    }

    // MARK: - Latest message

    /// The last message sent, while ``buffersLatest`` is on; nil before the first send and after ``resetLatest()``.
    public var latest: Message? {
        state.withLock { $0.latest }
    }

    /// Whether the last message sent is kept as ``latest``. Turning it off also forgets the buffered message.
    public var buffersLatest: Bool {
        get { state.withLock { $0.buffersLatest } }
        set {
            state.withLock { state in
                state.buffersLatest = newValue
                if !newValue { state.latest = nil }
            }
        }
    }

    /// Forgets the buffered message without sending anything.
    public func resetLatest() {
        state.withLock { $0.latest = nil }
    }

    // MARK: - Async

    /// The messages sent from now on, as an asynchronous sequence: `for await message in messenger.messages`.
    ///
    /// The observer is registered when this property is read, so nothing sent after that is missed. It is removed
    /// when the consuming task is cancelled, or when neither the sequence nor an iterator of it is referenced any
    /// more. The sequence finishes if the messenger is deallocated.
    public var messages: AsyncStream<Message> {
        messages()
    }

    /// The messages sent from now on for which `isIncluded` returns true (all when nil), as an asynchronous
    /// sequence buffered with `bufferingPolicy` while the consumer is busy.
    public func messages(
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        bufferingPolicy: AsyncStream<Message>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<Message> {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: bufferingPolicy)
        let token = observe(filter: isIncluded, onMessengerGone: { continuation.finish() }) { message in
            continuation.yield(message)
        }
        continuation.onTermination = { _ in token.cancel() }
        return stream
    }

    // MARK: - Introspection

    /// The registrations held now. One that was disposed, or whose observer was deallocated, counts until it is
    /// dropped: before the next message goes out, or when the list has grown enough for registering to sweep it.
    public var observerCount: Int {
        state.withLock { $0.registrations.count }
    }

    // MARK: - Internals

    @discardableResult
    private func register(
        identity: ObjectIdentifier,
        filter: (@Sendable (Message) -> Bool)?,
        onMessengerGone: (@Sendable () -> Void)? = nil,
        observerExists: (@Sendable () -> Bool)? = nil,
        deliver: @escaping @Sendable (Message) -> Bool
    ) -> ObserverRegistration<Message> {
        state.withLock { state in
            if state.registrations.count >= state.sweepOnRegisterAt {
                state.registrations.removeAll { !$0.isLive }
                state.sweepOnRegisterAt = max(16, 2 * state.registrations.count)
            }
            let registration = ObserverRegistration(
                identity: identity,
                addedAfter: state.lastSequence,
                filter: filter,
                onMessengerGone: onMessengerGone,
                observerExists: observerExists,
                deliver: deliver
            )
            state.registrations.append(registration)
            return registration
        }
    }

    private func unregister(_ registration: ObserverRegistration<Message>) {
        registration.state.store(.removed, ordering: .releasing)
        state.withLock { state in
            state.registrations.removeAll { $0 === registration }
        }
    }

    private func enqueue(_ message: Message, excluding excluded: ObjectIdentifier?) {
        let mustDeliver = state.withLock { state in
            state.lastSequence += 1
            if state.buffersLatest { state.latest = message }
            state.queue.append(Pending(message: message, sequence: state.lastSequence, excluded: excluded))
            if state.isDelivering { return false }
            state.isDelivering = true
            return true
        }
        if mustDeliver { deliverQueued() }
    }

    /// Hands out queued messages until the queue is empty; only one thread at a time runs this.
    ///
    /// The lock is held only to take the next message and a snapshot of the registrations, never while an observer
    /// runs, so observers may call back into the messenger.
    private func deliverQueued() {
        var foundDead = false
        while true {
            let next: (Pending, [ObserverRegistration<Message>])? = state.withLock { state in
                if foundDead || state.needsSweep {
                    state.registrations.removeAll { !$0.isActive }
                    state.needsSweep = false
                }
                guard let pending = state.queue.popFirst() else {
                    state.isDelivering = false
                    return nil
                }
                return (pending, state.registrations)
            }
            guard let (pending, registrations) = next else { return }
            foundDead = false
            for registration in registrations {
                if !registration.offer(pending.message, sequence: pending.sequence, excluding: pending.excluded) {
                    foundDead = true
                }
            }
        }
    }
}
