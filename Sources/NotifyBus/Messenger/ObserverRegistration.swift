import Synchronization
import NotifyProtocol

/// One registration in a ``Messenger``: who is called, with which messages, and whether it still counts.
final class ObserverRegistration<Message: Sendable>: Sendable {
    enum State: UInt8, AtomicRepresentable {
        case active
        /// Marked by `dispose`; dropped from the list before the next message goes out.
        case disposed
        /// Removed by `remove` or `cancel`, or its observer is gone.
        case removed
    }

    /// The observer object, or the token of a closure observer: what `remove`, `dispose` and `send(_:from:)` name.
    let identity: ObjectIdentifier
    /// The registration receives messages whose sequence number is greater than this: those sent after it was added.
    let addedAfter: UInt64
    /// Delivers a message; returns false when a weakly held observer has been deallocated.
    let deliver: @Sendable (Message) -> Bool
    /// Only messages for which this returns true are delivered (the "select" of the pattern).
    let filter: (@Sendable (Message) -> Bool)?
    /// Called when the messenger itself goes away, so an `AsyncStream` observer can finish.
    let onMessengerGone: (@Sendable () -> Void)?
    /// Called when ``Messenger/remove(_:)`` or ``Messenger/dispose(_:)`` ends it: what it holds besides (a main-actor
    /// observer's waiting messages) goes too.
    let onRemoved: (@Sendable () -> Void)?
    /// Whether a weakly held observer still exists; nil for closure observers, whose tokens unregister themselves.
    let observerExists: (@Sendable () -> Bool)?
    /// Only messages sent from this sender (``Messenger/send(_:from:)``) are delivered, when set.
    let sender: ObjectIdentifier?

    let state = Atomic<State>(.active)

    init(
        identity: ObjectIdentifier,
        addedAfter: UInt64,
        filter: (@Sendable (Message) -> Bool)?,
        onMessengerGone: (@Sendable () -> Void)? = nil,
        onRemoved: (@Sendable () -> Void)? = nil,
        observerExists: (@Sendable () -> Bool)? = nil,
        sender: ObjectIdentifier? = nil,
        deliver: @escaping @Sendable (Message) -> Bool
    ) {
        self.sender = sender
        self.identity = identity
        self.addedAfter = addedAfter
        self.filter = filter
        self.onMessengerGone = onMessengerGone
        self.onRemoved = onRemoved
        self.observerExists = observerExists
        self.deliver = deliver
    }

    var isActive: Bool { state.load(ordering: .acquiring) == .active }

    /// Whether the registration can still be called: active, and its observer (if held weakly) not deallocated.
    var isLive: Bool { isActive && observerExists?() != false }

    /// Calls the observer with `message` if the registration is still active and the message is one it wants:
    /// sent after it was added (or replayed to this registration alone: `target`), not by itself, by its sender if it
    /// has one.
    /// - Returns: false when the registration turned out to be dead (its weakly held observer is gone).
    func offer(_ message: Message, sequence: UInt64, from sentBy: ObjectIdentifier?, target: ObjectIdentifier?) -> Bool {
        guard isActive else { return true }
        if let target {
            guard target == ObjectIdentifier(self) else { return true }
        } else {
            guard sequence > addedAfter, identity != sentBy else { return true }
        }
        if let sender, sender != sentBy { return true }
        if let filter, !filter(message) { return true }
        if deliver(message) { return true }
        state.store(.removed, ordering: .releasing)
        return false
    }
}
