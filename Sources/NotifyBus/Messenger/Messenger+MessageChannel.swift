import NotifyProtocol

/// A messenger is a ``MessageChannel``: its synchronous API, under the protocol's names.
extension Messenger: MessageChannel {
    /// ``send(_:)`` under the name a channel across processes has: in a process, a message is where it goes (with
    /// its observers called, or queued for them, and kept as ``latest``) once `send` returns.
    public func post(_ message: Message) {
        send(message)
    }

    /// ``send(_:from:)`` under the name a channel across processes has.
    public func post(_ message: Message, from sender: AnyObject) {
        send(message, from: sender)
    }

    /// The protocol's form of ``observe(latestFirst:where:from:_:)``.
    public func observe(
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @Sendable (Message) -> Void
    ) -> ObservationToken {
        observe(latestFirst: latestFirst, where: isIncluded, from: nil, handler)
    }

    /// The protocol's form of ``observe(owner:latestFirst:where:from:_:)-(Owner,_,_,_,_)``.
    public func observe<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @Sendable (Owner, Message) -> Void
    ) {
        observe(owner: owner, latestFirst: latestFirst, where: isIncluded, from: nil, handler)
    }

    /// The protocol's form of ``observeOnMainActor(latestFirst:where:from:bufferingPolicy:_:)``.
    public func observeOnMainActor(
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @MainActor @Sendable (Message) -> Void
    ) -> ObservationToken {
        observeOnMainActor(latestFirst: latestFirst, where: isIncluded, from: nil, bufferingPolicy: .unbounded, handler)
    }

    /// The protocol's form of ``observeOnMainActor(owner:latestFirst:where:from:bufferingPolicy:_:)``.
    public func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) {
        observeOnMainActor(owner: owner, latestFirst: latestFirst, where: isIncluded, from: nil, bufferingPolicy: .unbounded, handler)
    }

    /// The protocol's form of ``add(_:latestFirst:where:from:)-(Observer,_,_,_)``.
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?
    ) where Observer.Message == Message {
        add(observer, filter: isIncluded, latestFirst: latestFirst, sender: nil)
    }

    /// The protocol's form of ``add(_:latestFirst:where:from:bufferingPolicy:)``.
    public func add<Observer: MainActorObserver>(
        _ observer: Observer,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?
    ) where Observer.Message == Message {
        add(observer, latestFirst: latestFirst, where: isIncluded, from: nil, bufferingPolicy: .unbounded)
    }

    /// The protocol's form of ``messages(latestFirst:where:from:bufferingPolicy:)``.
    public func messages(latestFirst: Bool, where isIncluded: (@Sendable (Message) -> Bool)?) -> AsyncStream<Message> {
        messages(latestFirst: latestFirst, where: isIncluded, from: nil, bufferingPolicy: .unbounded)
    }

    // The protocol's shorter forms: the same calls as the longer ones with their defaults.

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observe(_ handler: @escaping @Sendable (Message) -> Void) -> ObservationToken {
        observe(latestFirst: false, where: nil, from: nil, handler)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observe<Owner: AnyObject & Sendable>(owner: Owner, _ handler: @escaping @Sendable (Owner, Message) -> Void) {
        observe(owner: owner, latestFirst: false, where: nil, from: nil, handler)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observeOnMainActor(_ handler: @escaping @MainActor @Sendable (Message) -> Void) -> ObservationToken {
        observeOnMainActor(latestFirst: false, where: nil, from: nil, bufferingPolicy: .unbounded, handler)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) {
        observeOnMainActor(owner: owner, latestFirst: false, where: nil, from: nil, bufferingPolicy: .unbounded, handler)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func add<Observer: MessengerObserver>(_ observer: Observer) where Observer.Message == Message {
        add(observer, filter: nil, latestFirst: false, sender: nil)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func add<Observer: MainActorObserver>(_ observer: Observer) where Observer.Message == Message {
        add(observer, latestFirst: false, where: nil, from: nil, bufferingPolicy: .unbounded)
    }
}
