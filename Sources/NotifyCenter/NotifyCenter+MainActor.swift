import NotifyBus

/// Observers on the main actor: each is called one notification at a time, in the center's order, by a task on
/// the main actor. Each has a queue of its own, bounded as its `bufferingPolicy` says, so that a busy main actor
/// holds back neither the center's other observers nor its connection; what the queue drops is reported as
/// `onDropped` says (``/NotifyProtocol/DropReason/observer``).
extension NotifyCenter {
    /// Calls `handler` on the main actor with each notification of `Message` from now on, selected as
    /// ``observe(_:topics:latestFirst:where:from:onUndecodable:_:)-(Message.Type,_,_,_,_,_,(Received<Message>)->Void)``
    /// selects them, until the returned token is cancelled or deallocated.
    nonisolated(nonsending) public func observeOnMainActor<Message: NotifyMessage>(
        _ type: Message.Type,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        bufferingPolicy: AsyncStream<Received<Message>>.Continuation.BufferingPolicy = .bufferingNewest(NotifyCenter.ownQueueLimit),
        _ handler: @escaping @MainActor @Sendable (Received<Message>) -> Void
    ) async throws -> ObservationToken {
        let inbox = mainActorInbox(bufferingPolicy, handler)
        let id = try await start(
            Message.self,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            for: nil,
            onUndecodable: onUndecodable,
            onStop: { inbox.close() }
        ) { received in
            inbox.deliver(received)
            return true
        }
        return token(for: id)
    }

    /// Calls `handler` on the main actor with `owner` and each notification of `Message` from now on, for as long as
    /// `owner` exists: `center.observeOnMainActor(Status.self, owner: self) { model, status in model.apply(status) }`.
    /// `owner` is held weakly; ``remove(_:)`` of it ends this, with what waited for the main actor.
    nonisolated(nonsending) public func observeOnMainActor<Message: NotifyMessage, Owner: AnyObject & Sendable>(
        _ type: Message.Type,
        owner: Owner,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        bufferingPolicy: AsyncStream<Received<Message>>.Continuation.BufferingPolicy = .bufferingNewest(NotifyCenter.ownQueueLimit),
        _ handler: @escaping @MainActor @Sendable (Owner, Received<Message>) -> Void
    ) async throws {
        let weakOwner = WeakReference(owner)
        let inbox = mainActorInbox(bufferingPolicy) { received in
            // Gone while the notification waited for the main actor: nothing to call.
            guard let owner = weakOwner.object as? Owner else { return }
            handler(owner, received)
        }
        try await start(
            Message.self,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            for: owner,
            onUndecodable: onUndecodable,
            onStop: { inbox.close() }
        ) { received in
            guard weakOwner.object != nil else { return false }
            inbox.deliver(received)
            return true
        }
    }

    /// Registers `observer`, held weakly, for the notifications of its message type from now on, selected as
    /// ``add(_:topics:latestFirst:where:from:onUndecodable:)`` selects them; its `receive(_:)` is called on the main
    /// actor. Returns once the daemon confirmed the subscription.
    nonisolated(nonsending) public func add<Observer: MainActorObserver>(
        _ observer: Observer,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Observer.Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        bufferingPolicy: AsyncStream<Received<Observer.Message>>.Continuation.BufferingPolicy = .bufferingNewest(NotifyCenter.ownQueueLimit)
    ) async throws where Observer.Message: NotifyMessage {
        try await observeOnMainActor(
            Observer.Message.self,
            owner: observer,
            topics: topics,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            onUndecodable: onUndecodable,
            bufferingPolicy: bufferingPolicy
        ) { observer, received in observer.receive(received.value) }
    }
}
