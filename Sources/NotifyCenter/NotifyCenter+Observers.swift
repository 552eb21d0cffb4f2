import NotifyBus

/// Observers: closures kept by a token or by an owner handed to them, `async` handlers, objects held weakly, and
/// their removal. The main-actor forms are in NotifyCenter+MainActor.
extension NotifyCenter {
    // MARK: - Closure observers

    /// Calls `handler` with each notification of `Message` from now on (with `latestFirst`, each topic's buffered
    /// one first), selected by `isIncluded` and `sender`, until the returned token is cancelled or deallocated.
    /// Returns once the daemon confirmed the subscription.
    nonisolated(nonsending) public func observe<Message: NotifyMessage>(
        _ type: Message.Type,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        _ handler: @escaping @Sendable (Received<Message>) -> Void
    ) async throws -> ObservationToken {
        let id = try await start(
            Message.self,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            for: nil,
            onUndecodable: onUndecodable
        ) { received in
            handler(received)
            return true
        }
        return token(for: id)
    }

    /// The same, for the notifications equal to `value`.
    nonisolated(nonsending) public func observe<Message: NotifyMessage & Equatable>(
        _ type: Message.Type,
        equalTo value: Message,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        from sender: Sender? = nil,
        _ handler: @escaping @Sendable (Received<Message>) -> Void
    ) async throws -> ObservationToken {
        try await observe(type, topics: topics, latestFirst: latestFirst, where: { $0 == value }, from: sender, handler)
    }

    /// The same, with an `async` handler, called one notification at a time and in order; it runs where it was
    /// written (on the main actor in a `@MainActor` type). It has a queue of its own, bounded as `bufferingPolicy`
    /// says, so that it holds back neither the other observers nor the connection; what the queue drops is reported
    /// as `onDropped` says (``/NotifyProtocol/DropReason/observer``).
    nonisolated(nonsending) public func observe<Message: NotifyMessage>(
        _ type: Message.Type,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        bufferingPolicy: AsyncStream<Received<Message>>.Continuation.BufferingPolicy = .bufferingNewest(NotifyCenter.ownQueueLimit),
        @_inheritActorContext _ handler: sending @escaping @isolated(any) (Received<Message>) async -> Void
    ) async throws -> ObservationToken {
        let (stream, continuation) = AsyncStream.makeStream(of: Received<Message>.self, bufferingPolicy: bufferingPolicy)
        let id = try await start(
            Message.self,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            for: nil,
            onUndecodable: onUndecodable,
            onStop: { continuation.finish() }
        ) { [weak self] received in
            if case .dropped(let lost) = continuation.yield(received) { self?.reportDropped(lost) }
            return true
        }
        let token = token(for: id)
        Task { [weak token] in
            for await received in stream {
                // What waited in the queue is not handed out once the observer is removed.
                guard let token, !token.isCancelled else { return }
                await handler(received)
            }
        }
        return token
    }

    /// Calls `handler` with `owner` and each notification of `Message` from now on, selected as
    /// ``observe(_:topics:latestFirst:where:from:onUndecodable:_:)-(Message.Type,_,_,_,_,_,(Received<Message>)->Void)``
    /// selects them, for as long as `owner` exists: `center.observe(Status.self, owner: self) { owner, status in
    /// owner.apply(status) }`, with no weak capture to write. `owner` is held weakly; ``remove(_:)`` of it ends this
    /// with its other observations. Returns once the daemon confirmed the subscription.
    nonisolated(nonsending) public func observe<Message: NotifyMessage, Owner: AnyObject & Sendable>(
        _ type: Message.Type,
        owner: Owner,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        _ handler: @escaping @Sendable (Owner, Received<Message>) -> Void
    ) async throws {
        try await start(
            Message.self,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            for: owner,
            onUndecodable: onUndecodable
        ) { [weak owner] received in
            guard let owner else { return false }
            handler(owner, received)
            return true
        }
    }

    /// The same, with a handler that is not handed its owner (`Messenger.observe(owner:_:)`'s other form): the
    /// observation lasts as long as `owner` does.
    nonisolated(nonsending) public func observe<Message: NotifyMessage>(
        _ type: Message.Type,
        owner: any AnyObject & Sendable,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        _ handler: @escaping @Sendable (Received<Message>) -> Void
    ) async throws {
        try await observe(
            type,
            owner: owner,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            onUndecodable: onUndecodable
        ) { _, received in handler(received) }
    }

    // MARK: - Object observers

    /// Registers `observer`, held weakly, for the notifications of its message type from now on (with
    /// `latestFirst`, each topic's buffered one first), selected by `isIncluded` and `sender`, until it is
    /// deallocated or ``remove(_:)``d. Returns once the daemon confirmed the subscription.
    nonisolated(nonsending) public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Observer.Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil
    ) async throws where Observer.Message: NotifyMessage {
        try await start(
            Observer.Message.self,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            for: observer,
            onUndecodable: onUndecodable
        ) { [weak observer] received in
            guard let observer else { return false }
            observer.receive(received.value)
            return true
        }
    }

    /// The same, for the notifications equal to `value`.
    nonisolated(nonsending) public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        equalTo value: Observer.Message,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        from sender: Sender? = nil
    ) async throws where Observer.Message: NotifyMessage & Equatable {
        try await add(observer, topics: topics, latestFirst: latestFirst, where: { $0 == value }, from: sender)
    }

    // MARK: - Removal

    /// Stops every observation of `observer` (an object added, an owner, or a token this center gave), at once:
    /// nothing is handed to it after this returns, except in a call already under way on another thread (what waited
    /// in an observer's own queue is let go of). A token of another center or of a `Messenger` is not this center's
    /// to stop: it is left as it is.
    /// - Returns: whether it had any.
    @discardableResult
    public func remove(_ observer: AnyObject) -> Bool {
        if let token = observer as? ObservationToken {
            guard token.issuer == ObjectIdentifier(observations) else { return false }
            // Whether its observation still ran: one that ended by itself (its subscription lost for good, its
            // observer object gone) had none to stop, though its token was never cancelled.
            let had = observations.stop(token.tag)
            token.cancel()
            return had
        }
        return observations.stop(observer: ObjectIdentifier(observer))
    }

    /// ``remove(_:)``, under the name a `Messenger` has for marking an observer from inside a call or a
    /// deinitializer: on a center, removal costs the same from anywhere, so the two are one.
    public func dispose(_ observer: AnyObject) {
        remove(observer)
    }

    /// How many observations run now (those of observer objects that were deallocated end here).
    public var observerCount: Int {
        observations.sweep()
        return observations.count
    }
}
