import NotifyProtocol

/// Observers that run on the main actor: closures, closures kept by an owner that is handed to them, and
/// ``MainActorObserver`` objects.
///
/// Each is called one message at a time, in the order the messages were sent. A `send` on the main actor calls them
/// before it returns, as it calls any observer, unless messages sent from elsewhere still wait for the main actor
/// (they go first); a `send` from another thread hands the message to the main actor and returns, and the observer is
/// called there by a task. Until then messages wait in a buffer bounded as `bufferingPolicy` says; what a bounded one
/// drops is counted in ``droppedCount``. A busy main actor never holds back a `send` or the other observers.
extension Messenger {
    /// Calls `handler` on the main actor with the messages sent from now on, selected as
    /// ``observe(latestFirst:where:from:_:)`` selects them, until the returned token is cancelled or deallocated.
    public func observeOnMainActor(
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        bufferingPolicy: AsyncStream<Message>.Continuation.BufferingPolicy = .unbounded,
        _ handler: @escaping @MainActor @Sendable (Message) -> Void
    ) -> ObservationToken {
        let inbox = mainActorInbox(bufferingPolicy, handler)
        // The token is the registration's own, so that `remove(token)` and `send(_:from: token)` name it as they
        // name any closure observer's.
        return observe(
            filter: isIncluded,
            latestFirst: latestFirst,
            sender: sender.map(ObjectIdentifier.init),
            onCancel: { inbox.close() }
        ) { inbox.deliver($0) }
    }

    /// Calls `handler` on the main actor with `owner` and each message sent from now on, for as long as `owner`
    /// exists: `messenger.observeOnMainActor(owner: self) { model, message in model.apply(message) }`, with no weak
    /// capture to write. `owner` is held weakly; ``remove(_:)`` of it ends this with its other registrations.
    public func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        bufferingPolicy: AsyncStream<Message>.Continuation.BufferingPolicy = .unbounded,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) {
        let weakOwner = WeakReference(owner)
        let inbox = mainActorInbox(bufferingPolicy) { message in
            // Gone while the message waited for the main actor: nothing to call.
            guard let owner = weakOwner.object as? Owner else { return }
            handler(owner, message)
        }
        registerOwned(by: weakOwner, filter: isIncluded, latestFirst: latestFirst, sender: sender, onGone: { inbox.close() }) {
            inbox.deliver($0)
        }
    }

    /// Registers `observer`, held weakly, for the messages sent from now on, selected as
    /// ``add(_:latestFirst:where:from:)`` selects them; its `receive(_:)` is called on the main actor.
    public func add<Observer: MainActorObserver>(
        _ observer: Observer,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: AnyObject? = nil,
        bufferingPolicy: AsyncStream<Message>.Continuation.BufferingPolicy = .unbounded
    ) where Observer.Message == Message {
        observeOnMainActor(
            owner: observer,
            latestFirst: latestFirst,
            where: isIncluded,
            from: sender,
            bufferingPolicy: bufferingPolicy
        ) { observer, message in observer.receive(message) }
    }

    /// An inbox for a main-actor observer, bounded as `policy` says, counting what it drops.
    func mainActorInbox(
        _ policy: AsyncStream<Message>.Continuation.BufferingPolicy,
        _ handler: @escaping @MainActor @Sendable (Message) -> Void
    ) -> MainActorInbox<Message> {
        return MainActorInbox(limit: .init(policy), onDropped: { [weak self] _ in self?.noteDropped() }, handler: handler)
    }
}
