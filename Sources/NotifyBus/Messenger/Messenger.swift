internal import DequeModule
import Synchronization
import NotifyProtocol

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
///   order: the order in which the `send` calls happened. A main-actor observer
///   (``observeOnMainActor(latestFirst:where:from:bufferingPolicy:_:)``, a ``MainActorObserver``) is handed the
///   messages in that order too, one at a time on the main actor: before `send` returns when `send` runs on the main
///   actor and nothing of it still waits, else by a task there, whenever the main actor is free (before or after
///   `send` returned on its thread, possibly while other observers are being called there). An `async` handler runs
///   in a task of its own, in order too.
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
    struct Pending {
        let message: Message
        let sequence: UInt64
        /// Who sent it (``send(_:from:)``): not handed back to it, and what observers of one sender look for.
        let sender: ObjectIdentifier?
        /// The one registration it is for (not its observer, which may have others): the latest message, replayed
        /// to an observer that starts with it.
        var target: ObjectIdentifier? = nil
    }

    struct State {
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
        /// Who sent ``latest``.
        var latestSender: ObjectIdentifier?
        var buffersLatest: Bool
        /// Set by ``finish()``: the async sequences end, and new ones end at once.
        var isFinished = false
    }

    let state: Mutex<State>
    private let dropped = Atomic<Int>(0)

    /// Creates a messenger.
    /// - Parameter buffersLatest: whether the last message sent is kept and readable as ``latest`` (the default).
    public init(buffersLatest: Bool = true) {
        state = Mutex(State(buffersLatest: buffersLatest))
    }

    /// Creates a messenger that holds a current value from the start: `latest` is `initial` until something is
    /// sent, and observers that start with the latest (`latestFirst`) are handed it at once. The seeds'
    /// observable value, SwiftObserver's `Var`.
    public init(latest initial: Message) {
        state = Mutex(State(latest: initial, buffersLatest: true))
    }

    deinit {
        let registrations = state.withLock { $0.registrations }
        for registration in registrations { registration.onMessengerGone?() }
    }

    // MARK: - Sending

    /// Sends `message` to every observer registered now (see "Delivery" above for when it reaches them).
    public func send(_ message: Message) {
        enqueue(message, from: nil)
    }

    /// Sends `message` to every observer except `sender` (an observer object or an ``ObservationToken``): the
    /// sender is not notified of its own message.
    public func send(_ message: Message, from sender: AnyObject) {
        enqueue(message, from: ObjectIdentifier(sender))
    }

    // MARK: - Latest message

    /// The last message sent, while ``buffersLatest`` is on (before the first, the initial value of
    /// ``init(latest:)``); nil before anything was sent and after ``clear()``.
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

    /// Sends the buffered ``latest`` message again, to every observer registered now but the one that sent it
    /// (SwiftObserver's `send()`): for observers that must hear the current value once more, a redraw say.
    /// - Returns: whether there was a message to send (nothing is sent while none is buffered).
    @discardableResult
    public func sendLatest() -> Bool {
        // Read and queued under one lock: a send between the two would otherwise be followed by the value it
        // replaced, which would become the latest again.
        var sent = false
        enqueue { state in
            guard let latest = state.latest else { return nil }
            sent = true
            return (latest, state.latestSender)
        }
        return sent
    }

    /// Forgets the buffered message without sending anything (the daemon's `CLEAR`, a NotifyCenter's `clear`).
    public func clear() {
        state.withLock { $0.latest = nil }
    }

    /// Forgets the buffered message without sending anything.
    @available(*, deprecated, renamed: "clear()")
    public func resetLatest() {
        clear()
    }

    // MARK: - Async

    /// The messages sent from now on, as an asynchronous sequence: `for await message in messenger.messages`.
    ///
    /// The observer is registered when this property is read, so nothing sent after that is missed. It is removed
    /// when the consuming task is cancelled, or when neither the sequence nor an iterator of it is referenced any
    /// more. The sequence finishes when the messenger is deallocated or ``finish()``ed.
    ///
    /// Its buffer is unbounded: `send` never waits and never drops, so a consumer slower than the senders holds
    /// every message it has not taken yet. Bound it with ``messages(latestFirst:where:from:bufferingPolicy:)``.
    public var messages: AsyncStream<Message> {
        messages()
    }

    /// The messages sent from now on for which `isIncluded` returns true (all when nil), as an asynchronous
    /// sequence; with `latestFirst`, ``latest`` first; with `sender`, only those sent from it.
    ///
    /// While the consumer is busy they wait in a buffer as `bufferingPolicy` says: `.unbounded` (the default, as
    /// ``messages``), or `.bufferingNewest(n)` / `.bufferingOldest(n)`, which hold at most `n` and drop the oldest
    /// or the newest past that. `send` never waits for a consumer, so a bounded buffer is where messages are lost;
    /// ``droppedCount`` counts them, so that what a slow consumer lost can be told.
    public func messages(
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        bufferingPolicy: AsyncStream<Message>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<Message> {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: bufferingPolicy)
        if state.withLock({ $0.isFinished }) {
            continuation.finish()
            return stream
        }
        let token = observe(
            filter: isIncluded,
            latestFirst: latestFirst,
            sender: sender.map(ObjectIdentifier.init),
            onMessengerGone: { continuation.finish() }
        ) { [weak self] message in self?.yield(message, to: continuation) }
        continuation.onTermination = { _ in token.cancel() }
        // A finish() between the check above and the registration did not see this one.
        if state.withLock({ $0.isFinished }) { continuation.finish() }
        return stream
    }

    /// Hands `message` to a stream's buffer, counting it when a bounded buffer drops it.
    func yield(_ message: Message, to continuation: AsyncStream<Message>.Continuation) {
        if case .dropped = continuation.yield(message) { noteDropped() }
    }

    /// Counts a message a bounded buffer dropped (``droppedCount``).
    func noteDropped() {
        dropped.add(1, ordering: .relaxed)
    }

    /// Messages the bounded buffers of this messenger dropped since it was made: those of
    /// ``messages(latestFirst:where:from:bufferingPolicy:)`` and of
    /// ``observeOnMainActor(latestFirst:where:from:bufferingPolicy:_:)`` alike, one total for all of them (not one
    /// per stream).
    public var droppedCount: Int { dropped.load(ordering: .relaxed) }

    /// Ends every asynchronous sequence of this messenger (their `for await` loops finish) and makes those asked
    /// for later end at once; closure and object observers stay, and `send` goes on reaching them. Main-actor
    /// observers (``observeOnMainActor(latestFirst:where:from:bufferingPolicy:_:)``) are closure observers and stay.
    public func finish() {
        let registrations = state.withLock { state in
            state.isFinished = true
            return state.registrations
        }
        for registration in registrations { registration.onMessengerGone?() }
    }

    /// Ends every observation: the asynchronous sequences finish (as with ``finish()``), and every observer,
    /// object, closure and main-actor one, is removed. `send` goes on keeping ``latest`` and reaches observers added
    /// later: a messenger, unlike a center's connection, has nothing to close.
    public func close() {
        let registrations = state.withLock { state in
            state.isFinished = true
            defer { state.registrations.removeAll() }
            for registration in state.registrations { registration.state.store(.removed, ordering: .releasing) }
            return state.registrations
        }
        for registration in registrations {
            registration.onMessengerGone?()
            registration.onRemoved?()
        }
    }

    // MARK: - Introspection

    /// The registrations held now. One that was disposed, or whose observer was deallocated, counts until it is
    /// dropped: before the next message goes out, or when the list has grown enough for registering to sweep it.
    public var observerCount: Int {
        state.withLock { $0.registrations.count }
    }

    // MARK: - Internals

    @discardableResult
    func register(
        identity: ObjectIdentifier,
        filter: (@Sendable (Message) -> Bool)?,
        onMessengerGone: (@Sendable () -> Void)? = nil,
        observerExists: (@Sendable () -> Bool)? = nil,
        onRemoved: (@Sendable () -> Void)? = nil,
        latestFirst: Bool = false,
        sender: ObjectIdentifier? = nil,
        deliver: @escaping @Sendable (Message) -> Bool
    ) -> ObserverRegistration<Message> {
        let (registration, mustDeliver) = state.withLock { state in
            if state.registrations.count >= state.sweepOnRegisterAt {
                state.registrations.removeAll { !$0.isLive }
                state.sweepOnRegisterAt = max(16, 2 * state.registrations.count)
            }
            let registration = ObserverRegistration(
                identity: identity,
                addedAfter: state.lastSequence,
                filter: filter,
                onMessengerGone: onMessengerGone,
                onRemoved: onRemoved,
                observerExists: observerExists,
                sender: sender,
                deliver: deliver
            )
            state.registrations.append(registration)
            // The latest goes through the queue, so that it comes before anything sent after it, to this
            // registration alone.
            guard latestFirst, let latest = state.latest else { return (registration, false) }
            state.queue.append(Pending(message: latest, sequence: state.lastSequence, sender: state.latestSender, target: ObjectIdentifier(registration)))
            if state.isDelivering { return (registration, false) }
            state.isDelivering = true
            return (registration, true)
        }
        if mustDeliver { deliverQueued() }
        return registration
    }

    func unregister(_ registration: ObserverRegistration<Message>) {
        registration.state.store(.removed, ordering: .releasing)
        state.withLock { state in
            state.registrations.removeAll { $0 === registration }
        }
    }

    private func enqueue(_ message: Message, from sender: ObjectIdentifier?) {
        enqueue { _ in (message, sender) }
    }

    /// Sends the message `next` returns (nil: none), chosen under the same lock that queues it.
    private func enqueue(_ next: (inout State) -> (Message, ObjectIdentifier?)?) {
        let mustDeliver = state.withLock { state in
            guard let (message, sender) = next(&state) else { return false }
            state.lastSequence += 1
            if state.buffersLatest {
                state.latest = message
                state.latestSender = sender
            }
            state.queue.append(Pending(message: message, sequence: state.lastSequence, sender: sender))
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
                if !registration.offer(pending.message, sequence: pending.sequence, from: pending.sender, target: pending.target) {
                    foundDead = true
                }
            }
        }
    }
}

/// A weak reference that may cross threads: reading a weak reference is safe from any thread, and the object is only
/// compared for being there, never used.
package final class WeakReference: @unchecked Sendable {
    package weak var object: AnyObject?
    package let identity: ObjectIdentifier

    package init(_ object: AnyObject) {
        self.object = object
        identity = ObjectIdentifier(object)
    }
}
