import Synchronization
import NotifyProtocol

/// Keeps a closure observer registered: cancel it, or let it be deallocated, and delivery stops.
///
/// Returned by ``Messenger/observe(latestFirst:where:from:_:)`` and its variants. Hold on to it for as long as you
/// want messages; a token that is discarded right away stops the observation right away.
/// A token also names its observer to ``Messenger/send(_:from:)``, so an observer can send without hearing
/// its own message. Tokens are equal only to themselves, so that many can be kept in a set (``store(in:)``).
public final class ObservationToken: Sendable, Hashable {
    private let onCancel = Mutex<(@Sendable () -> Void)?>(nil)
    private let cancelled = Atomic<Bool>(false)

    /// A token whose identity names a registration that does not exist yet; ``arm(_:)`` completes it.
    init() {
        issuer = nil
        tag = 0
    }

    /// A token that runs `cancel` once, when it is cancelled or deallocated: for observations made elsewhere (the
    /// NotifyCenter library's, over the daemon) to be held like a messenger's.
    public init(onCancel cancel: @escaping @Sendable () -> Void) {
        onCancel.withLock { $0 = cancel }
        issuer = nil
        tag = 0
    }

    /// A token as ``init(onCancel:)`` makes one, that also names what issued it: whoever removes by token checks it
    /// is theirs (the NotifyCenter's `remove(_:)` refuses another center's token). `issuer` must stay alive as long
    /// as the token (`cancel` keeps it), so that no other object takes its identity.
    /// `tag`: what the issuer knows the observation by.
    package init(issuer: ObjectIdentifier, tag: UInt64, onCancel cancel: @escaping @Sendable () -> Void) {
        onCancel.withLock { $0 = cancel }
        self.issuer = issuer
        self.tag = tag
    }

    /// What issued the token, when it says.
    package let issuer: ObjectIdentifier?
    /// What the issuer knows the observation by (0 when it did not say).
    package let tag: UInt64

    /// Sets what cancelling does. The messenger registers the observer under this token's identity first, so the
    /// two are made in two steps.
    func arm(_ action: @escaping @Sendable () -> Void) {
        onCancel.withLock { $0 = action }
    }

    /// Stops the observation. Safe to call more than once, from any thread, and from inside the observer.
    public func cancel() {
        cancelled.store(true, ordering: .releasing)
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    /// Whether ``cancel()`` has been called.
    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    deinit { cancel() }

    /// Keeps this token in `set`, for as long as the set holds it: `center.observe { … }.store(in: &tokens)`.
    public func store(in set: inout Set<ObservationToken>) {
        set.insert(self)
    }

    public static func == (lhs: ObservationToken, rhs: ObservationToken) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
