internal import DequeModule
import Synchronization
import NotifyProtocol

/// Observing: observer objects held weakly, closures held by a token or kept by their owner's life, and their
/// removal.
extension Messenger {
    /// Registers `observer`, held weakly, for the messages sent from now on, those for which `isIncluded` returns
    /// true when given; with `latestFirst`, it is handed ``latest`` first; with `sender`, it gets only the
    /// messages sent from it (``send(_:from:)``: NotificationCenter's `object:`).
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil
    ) where Observer.Message == Message {
        add(observer, filter: isIncluded, latestFirst: latestFirst, sender: sender.map(ObjectIdentifier.init))
    }

    /// Registers `observer`, held weakly, for the messages sent from now on that equal `value` (with `latestFirst`,
    /// ``latest`` first if it does; with `sender`, only those sent from it): the options of a center's `equalTo:`.
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        equalTo value: Message,
        latestFirst: Bool = false,
        from sender: AnyObject? = nil
    ) where Observer.Message == Message, Message: Equatable {
        add(observer, filter: { $0 == value }, latestFirst: latestFirst, sender: sender.map(ObjectIdentifier.init))
    }

    func add<Observer: MessengerObserver>(
        _ observer: Observer,
        filter: (@Sendable (Message) -> Bool)?,
        latestFirst: Bool,
        sender: ObjectIdentifier?
    ) where Observer.Message == Message {
        register(
            identity: ObjectIdentifier(observer),
            filter: filter,
            observerExists: { [weak observer] in observer != nil },
            latestFirst: latestFirst,
            sender: sender
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
        let removed = state.withLock { state in
            var removed: [ObserverRegistration<Message>] = []
            state.registrations.removeAll { registration in
                guard registration.identity == identity else { return false }
                registration.state.store(.removed, ordering: .releasing)
                removed.append(registration)
                return true
            }
            return removed
        }
        for registration in removed { registration.onRemoved?() }
        // A token is done with: what it holds besides its registration (a main-actor observer's buffer) goes too.
        if !removed.isEmpty, let token = observer as? ObservationToken { token.cancel() }
        return !removed.isEmpty
    }

    /// Marks every registration of `observer` as disposed: it is not called again, and it is dropped from the list
    /// before the next message is sent.
    public func dispose(_ observer: AnyObject) {
        let identity = ObjectIdentifier(observer)
        let disposed = state.withLock { state in
            let disposed = state.registrations.filter { $0.identity == identity }
            for registration in disposed { registration.state.store(.disposed, ordering: .releasing) }
            if !disposed.isEmpty { state.needsSweep = true }
            return disposed
        }
        for registration in disposed { registration.onRemoved?() }
    }

    // MARK: - Closure observers

    /// Calls `handler` with the messages sent from now on, those for which `isIncluded` returns true when given,
    /// until the returned token is cancelled or deallocated. With `latestFirst`, it is called with
    /// ``latest`` first (before `observe` returns, unless a delivery is under way); with `sender`, only with the
    /// messages sent from it (``send(_:from:)``: NotificationCenter's `object:`).
    public func observe(
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken {
        observe(filter: isIncluded, latestFirst: latestFirst, sender: sender.map(ObjectIdentifier.init), handler)
    }

    /// Calls `handler` with the messages sent from now on, selected as ``observe(latestFirst:where:from:_:)`` selects
    /// them, for as long as `owner` exists: an observer kept by its owner's life, not by a token, as keyed closure
    /// observers are. Once `owner` is deallocated the handler is not called again and the registration goes before
    /// the next message is sent; ``remove(_:)`` of `owner` ends it sooner (with every other registration of it).
    /// `owner` is held weakly: a handler that captures it strongly keeps it alive for as long as the messenger.
    public func observe(
        owner: AnyObject,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        _ handler: @escaping @Sendable (Message) -> Void
    ) {
        registerOwned(by: WeakReference(owner), filter: isIncluded, latestFirst: latestFirst, sender: sender, deliver: handler)
    }

    /// The same, handing `owner` to `handler` with each message:
    /// `messenger.observe(owner: self) { owner, message in owner.apply(message) }`, with no weak capture to write.
    public func observe<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        _ handler: @escaping @Sendable (Owner, Message) -> Void
    ) {
        let weakOwner = WeakReference(owner)
        registerOwned(by: weakOwner, filter: isIncluded, latestFirst: latestFirst, sender: sender) { message in
            guard let owner = weakOwner.object as? Owner else { return }
            handler(owner, message)
        }
    }

    /// Calls `handler`, an `async` function, with the messages sent from now on, selected as
    /// ``observe(latestFirst:where:from:_:)`` selects them, one at a time and in order: a message waits until the call
    /// for the one before it returned. It runs where it was written (on the main actor in a `@MainActor` type), in a
    /// task of its own, so `send` never waits for it; messages wait meanwhile in a buffer bounded as `bufferingPolicy`
    /// says (``droppedCount`` counts what a bounded one drops). Until the returned token is cancelled or deallocated.
    public func observe(
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        bufferingPolicy: AsyncStream<Message>.Continuation.BufferingPolicy = .unbounded,
        @_inheritActorContext _ handler: sending @escaping @isolated(any) (Message) async -> Void
    ) -> ObservationToken {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: bufferingPolicy)
        let token = observe(
            filter: isIncluded,
            latestFirst: latestFirst,
            sender: sender.map(ObjectIdentifier.init),
            onCancel: { continuation.finish() }
        ) { [weak self] message in self?.yield(message, to: continuation) }
        Task { [weak token] in
            for await message in stream {
                // What waited in the buffer is not handed out once the observer is removed.
                guard let token, !token.isCancelled else { return }
                await handler(message)
            }
        }
        return token
    }

    /// Calls `handler` with the messages sent from now on that equal `value` (with `latestFirst` and `sender` as
    /// ``observe(latestFirst:where:from:_:)`` has them), until the returned token is cancelled or deallocated.
    public func observe(
        equalTo value: Message,
        latestFirst: Bool = false,
        from sender: AnyObject? = nil,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken where Message: Equatable {
        observe(filter: { $0 == value }, latestFirst: latestFirst, sender: sender.map(ObjectIdentifier.init), handler)
    }

    /// Registers `deliver` for as long as `owner` exists; `onGone` runs when it is removed or its owner is found gone.
    func registerOwned(
        by owner: WeakReference,
        filter: (@Sendable (Message) -> Bool)?,
        latestFirst: Bool,
        sender: AnyObject?,
        onGone: (@Sendable () -> Void)? = nil,
        deliver: @escaping @Sendable (Message) -> Void
    ) {
        register(
            identity: owner.identity,
            filter: filter,
            observerExists: { owner.object != nil },
            onRemoved: onGone,
            latestFirst: latestFirst,
            sender: sender.map(ObjectIdentifier.init)
        ) { message in
            guard owner.object != nil else { return false }
            deliver(message)
            return true
        }
    }

    func observe(
        filter: (@Sendable (Message) -> Bool)?,
        latestFirst: Bool,
        sender: ObjectIdentifier?,
        onMessengerGone: (@Sendable () -> Void)? = nil,
        onCancel: (@Sendable () -> Void)? = nil,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken {
        let token = ObservationToken()
        let registration = register(
            identity: ObjectIdentifier(token),
            filter: filter,
            onMessengerGone: onMessengerGone,
            // Removed by `dispose` or `close` rather than by its token: what the token holds (a main-actor observer's
            // queue, an async handler's stream) goes too.
            onRemoved: { [weak token] in token?.cancel() },
            latestFirst: latestFirst,
            sender: sender
        ) {
            handler($0)
            return true
        }
        token.arm { [weak self] in
            self?.unregister(registration)
            onCancel?()
        }
        return token
    }
}
