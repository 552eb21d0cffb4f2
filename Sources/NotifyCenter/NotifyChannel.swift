import NotifyBus

/// One kind of notification on one topic of a ``NotifyCenter``, as a ``/NotifyBus/MessageChannel``: the calls of a
/// `Messenger`, under the same names, across processes. Made by ``NotifyCenter/channel(for:topic:initial:)``.
///
/// ```swift
/// let status = center.channel(for: BackupStatus.self, initial: .idle)
/// try await status.observe(owner: self) { model, status in model.show(status) }
/// try await status.post(.running)
/// ```
///
/// Where a process boundary makes a difference:
/// - ``latest`` is the daemon's buffered message of the topic, or `initial` while it holds none (never posted, or
///   cleared); an observer that starts with the latest is handed `initial` then. `initial` is never sent to other
///   processes, nor by ``sendLatest()``, which sends only what the daemon holds.
/// - ``post(_:)`` waits for the daemon's acknowledgement; ``post(_:from:)`` leaves out the observer that posts, and
///   the center's other observers hear a post only if the center hears its own (`receivesOwnPosts`).
/// - Observers receive what the daemon delivers after their subscription was confirmed, which `observe` and `add`
///   wait for. A message on the topic that does not decode is skipped and reported as the center's
///   `onUndecodable` says.
public struct NotifyChannel<Message: NotifyMessage>: MessageChannel {
    /// The center it posts and observes through.
    public let center: NotifyCenter
    /// The topic it posts to and observes.
    public let topic: Topic
    /// What ``latest`` is while the daemon holds nothing for the topic.
    public let initial: Message?

    init(center: NotifyCenter, topic: Topic, initial: Message?) {
        self.center = center
        self.topic = topic
        self.initial = initial
    }

    private var pattern: TopicPattern { TopicPattern(topic) }

    // MARK: - Posting and the latest

    /// Posts `message` to the channel's topic, buffered as its latest, and waits for the daemon's acknowledgement.
    nonisolated(nonsending) public func post(_ message: Message) async throws {
        _ = try await center.post(Message.codec.encode(message), to: topic, retain: true, from: nil)
    }

    /// Posts `message` except to `sender` (an observer, an owner, or a token of this center).
    nonisolated(nonsending) public func post(_ message: Message, from sender: AnyObject) async throws {
        _ = try await center.post(Message.codec.encode(message), to: topic, retain: true, from: sender)
    }

    /// The daemon's buffered latest of the topic, decoded, or ``initial`` when it holds none.
    /// - Throws: ``UndecodableNotification`` when the buffered message is not a `Message`.
    public var latest: Message? {
        get async throws { try await center.latest(Message.self, topic: topic)?.value ?? initial }
    }

    /// Forgets the daemon's buffered latest of the topic without sending anything (``latest`` is ``initial`` again).
    nonisolated(nonsending) public func clear() async throws {
        try await center.clear(Message.self, topic: topic)
    }

    /// Hands the daemon's latest of the topic to the center's observers of it again (see
    /// ``NotifyCenter/sendLatest(_:topic:)``); false when it holds none.
    @discardableResult
    nonisolated(nonsending) public func sendLatest() async throws -> Bool {
        try await center.sendLatest(Message.self, topic: topic)
    }

    // MARK: - Observing

    /// Calls `handler` with each message from now on (with `latestFirst`, the latest or ``initial`` first) that
    /// `isIncluded` selects, until the returned token is cancelled or deallocated.
    public func observe(
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        _ handler: @escaping @Sendable (Message) -> Void
    ) async throws -> ObservationToken {
        let id = try await start(for: nil, latestFirst: latestFirst, where: isIncluded) { message in
            handler(message)
            return true
        }
        return center.token(for: id)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observe(_ handler: @escaping @Sendable (Message) -> Void) async throws -> ObservationToken {
        try await observe(latestFirst: false, where: nil, handler)
    }

    /// Calls `handler` with `owner` and each message from now on, for as long as `owner` exists.
    public func observe<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        _ handler: @escaping @Sendable (Owner, Message) -> Void
    ) async throws {
        let weakOwner = WeakReference(owner)
        try await start(for: owner, latestFirst: latestFirst, where: isIncluded) { message in
            guard let owner = weakOwner.object as? Owner else { return false }
            handler(owner, message)
            return true
        }
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observe<Owner: AnyObject & Sendable>(owner: Owner, _ handler: @escaping @Sendable (Owner, Message) -> Void) async throws {
        try await observe(owner: owner, latestFirst: false, where: nil, handler)
    }

    /// Calls `handler` on the main actor with each message from now on, in order, from a queue of its own (see
    /// ``NotifyCenter``'s main-actor observers).
    public func observeOnMainActor(
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        _ handler: @escaping @MainActor @Sendable (Message) -> Void
    ) async throws -> ObservationToken {
        let id = try await startOnMainActor(for: nil, latestFirst: latestFirst, where: isIncluded, handler)
        return center.token(for: id)
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observeOnMainActor(_ handler: @escaping @MainActor @Sendable (Message) -> Void) async throws -> ObservationToken {
        try await observeOnMainActor(latestFirst: false, where: nil, handler)
    }

    /// Calls `handler` on the main actor with `owner` and each message from now on, for as long as `owner` exists.
    public func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) async throws {
        let weakOwner = WeakReference(owner)
        try await startOnMainActor(for: owner, latestFirst: latestFirst, where: isIncluded) { message in
            // Gone while the message waited for the main actor: nothing to call.
            guard let owner = weakOwner.object as? Owner else { return }
            handler(owner, message)
        }
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func observeOnMainActor<Owner: AnyObject & Sendable>(
        owner: Owner,
        _ handler: @escaping @MainActor @Sendable (Owner, Message) -> Void
    ) async throws {
        try await observeOnMainActor(owner: owner, latestFirst: false, where: nil, handler)
    }

    /// Registers `observer`, held weakly, for the messages from now on that `isIncluded` selects.
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil
    ) async throws where Observer.Message == Message {
        try await observe(owner: observer, latestFirst: latestFirst, where: isIncluded) { observer, message in
            observer.receive(message)
        }
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func add<Observer: MessengerObserver>(_ observer: Observer) async throws where Observer.Message == Message {
        try await add(observer, latestFirst: false, where: nil)
    }

    /// Registers `observer`, held weakly, whose `receive(_:)` is called on the main actor.
    public func add<Observer: MainActorObserver>(
        _ observer: Observer,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil
    ) async throws where Observer.Message == Message {
        try await observeOnMainActor(owner: observer, latestFirst: latestFirst, where: isIncluded) { observer, message in
            observer.receive(message)
        }
    }

    /// The shorter form: every message from now on, with no selection and no latest first.
    public func add<Observer: MainActorObserver>(_ observer: Observer) async throws where Observer.Message == Message {
        try await add(observer, latestFirst: false, where: nil)
    }

    /// Ends every observation of `observer` (an object, an owner, or a token of this center) at once.
    @discardableResult
    public func remove(_ observer: AnyObject) -> Bool {
        center.remove(observer)
    }

    // MARK: - The asynchronous sequence

    /// The messages from now on (with `latestFirst`, the daemon's latest, or ``initial`` when it holds none, first)
    /// that `isIncluded` selects; one that does not decode is skipped and reported, and the sequence throws only when
    /// the connection is lost for good.
    public func messages(latestFirst: Bool = false, where isIncluded: (@Sendable (Message) -> Bool)? = nil) async throws -> Messages {
        let base = try await center.messages(of: Message.self, topics: pattern, latestFirst: latestFirst, where: isIncluded)
        // The daemon's latest came before its confirmation, into the sequence: nothing there, so none is held.
        var first: Message?
        if latestFirst, let initial, isIncluded?(initial) ?? true, base.buffered.events == 0 { first = initial }
        return Messages(base: base, first: first)
    }

    /// Every message from now on.
    public var messages: Messages {
        get async throws { try await messages(latestFirst: false, where: nil) }
    }

    /// The values of a channel's notifications.
    public struct Messages: AsyncSequence, Sendable {
        /// What the sequence yields.
        public typealias Element = Message
        let base: Notifications<Message>
        /// The initial value, standing in for a latest the daemon did not hold.
        let first: Message?

        /// An iterator over the values.
        public func makeAsyncIterator() -> Iterator {
            Iterator(base: base.values.makeAsyncIterator(), first: first)
        }

        /// Takes the next value, skipping (and reporting) what does not decode and notices of drops.
        public struct Iterator: AsyncIteratorProtocol {
            var base: Notifications<Message>.Values.Iterator
            var first: Message?

            /// The next value, taken on its caller's executor.
            public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(any Error) -> Message? {
                try await next()
            }

            /// The next value.
            public nonisolated(nonsending) mutating func next() async throws -> Message? {
                if let value = first {
                    first = nil
                    return value
                }
                return try await base.next()?.value
            }
        }
    }

    // MARK: - Starting an observation

    /// Starts an observation of the channel's topic for `owner` (nil: one kept by a token), handing each message
    /// `isIncluded` selects to `deliver` (false: its observer is gone); with `latestFirst`, ``initial`` first when
    /// the daemon held no latest.
    @discardableResult
    private func start(
        for owner: (any AnyObject & Sendable)?,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        onStop: (@Sendable () -> Void)? = nil,
        _ deliver: @escaping @Sendable (Message) -> Bool
    ) async throws -> UInt64 {
        var initialCall: (@Sendable () async -> Bool)?
        if latestFirst, let initial, isIncluded?(initial) ?? true { initialCall = { deliver(initial) } }
        return try await center.start(
            Message.self,
            topics: pattern,
            latestFirst: latestFirst,
            where: isIncluded,
            from: nil,
            for: owner,
            onUndecodable: nil,
            onStop: onStop,
            initial: initialCall
        ) { received in deliver(received.value) }
    }

    /// The same, for `handler` on the main actor, from a queue of its own.
    @discardableResult
    private func startOnMainActor(
        for owner: (any AnyObject & Sendable)?,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        _ handler: @escaping @MainActor @Sendable (Message) -> Void
    ) async throws -> UInt64 {
        let topic = self.topic
        let inbox = MainActorInbox<Message>(
            limit: .newest(NotifyCenter.ownQueueLimit),
            onDropped: { [weak center] _ in
                center?.onDropped(DropNotice(topic: topic, count: 1, firstSequence: 0, lastSequence: 0, reason: .observer))
            },
            handler: handler
        )
        let weakOwner = owner.map(WeakReference.init)
        return try await start(for: owner, latestFirst: latestFirst, where: isIncluded, onStop: { inbox.close() }) { message in
            if let weakOwner, weakOwner.object == nil { return false }
            inbox.deliver(message)
            return true
        }
    }
}
