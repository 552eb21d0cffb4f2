// `import NotifyCenter` is all a service writes: the client's names (Topic, NotifyClient, …) come with it.
@_exported public import NotifyBus
import Synchronization

/// A notification center for a whole host, for Swift programs: the in-process ``/NotifyBus/Messenger`` across processes,
/// through notifyd, with typed notifications (``NotifyMessage``).
///
/// ```swift
/// let center = try await NotifyCenter.connect()
/// try await center.post(BackupFinished(host: "db1", bytes: 1 << 30))
///
/// // Elsewhere, in another process:
/// let token = try await center.observe(BackupFinished.self, latestFirst: true) { finished in
///     print("backup of \(finished.value.host) done, posted by pid \(finished.publisher.pid)")
/// }
/// ```
///
/// What ``/NotifyBus/Messenger`` offers, with the same names where the meaning is the same, and where it differs across
/// processes:
/// - Observers are closures kept by an ``/NotifyBus/ObservationToken`` (cancelled when it is deallocated) or objects held
///   weakly (``add(_:topics:latestFirst:where:from:onUndecodable:)``), selected by value, by predicate or by
///   sender.
/// - Observers of a center are called one at a time, never concurrently, in one order: the order in which the
///   daemon's deliveries reach the center's connection (each topic's in the order the daemon numbered them), every
///   observer's calls in that one sequence, as a messenger calls its observers in the order of its sends. Unlike a
///   messenger's, an observer receives the notifications the daemon delivers after its subscription is confirmed,
///   which ``observe(_:topics:latestFirst:where:from:onUndecodable:_:)`` waits for: what is posted after it
///   returns is never missed. A slow observer holds back the others, as in a messenger.
/// - ``latest(_:topic:)`` is the daemon's buffered message, typed; ``clear(_:topic:)`` forgets it without sending.
/// - A center does not hear its own posts unless it is made with `receivesOwnPosts`: the daemon leaves them out for
///   its connection (other centers of the same process are other connections, and hear them).
/// - ``remove(_:)`` stops an observer's deliveries at once; one already handed to it finishes. There is no
///   `dispose`: removal costs the same from anywhere.
///
/// It is backed by one ``/NotifyBus/NotifyClient``: its connection, its bounded buffers and the daemon's backpressure, and its
/// reconnect: across a restart of the daemon each observer goes on after the last notification it received, from
/// the daemon's history, and is handed none it had (a post whose acknowledgement was lost with the connection is
/// made again, so it may arrive twice: at least once). The observers and streams of one center share its
/// connection: one that is not consumed (a `notifications` sequence held but not iterated) fills its buffer and
/// then holds back the others; give an independent consumer a center of its own.
public final class NotifyCenter: Sendable {
    /// The connection under the center, for what the typed layer does not offer.
    public let client: NotifyClient

    private let onUndecodable: @Sendable (UndecodableNotification) -> Void
    private let onDropped: @Sendable (DropNotice) -> Void
    private let onEnded: @Sendable (ObservationEnded) -> Void
    /// The observations running, and the one queue their events come in by, in the connection's order.
    private let observations = ObservationTable()
    /// What this center posted, to be left out of what its subscriptions resume with while it does not hear its own.
    private let ownPosts: OwnPosts

    /// A center over `client`, which keeps its echo setting: it hears its own posts as the client does
    /// (``/NotifyBus/NotifyClient/receivesOwnPublishes``), now and after any later `setEcho`. A client told `setEcho(false)` makes a center that does not, as
    /// ``connect(to:receivesOwnPosts:reconnectWithin:onUndecodable:onDropped:onEnded:)`` makes by default: its own
    /// posts are then left out also of what a subscription resumes with after a reconnect.
    /// - Parameters:
    ///   - client: the connection the center posts and observes through.
    ///   - onUndecodable: what is done with a message on an observer's topics that does not decode as its type,
    ///     unless the observer says otherwise; by default a line on standard error.
    ///   - onDropped: what is done with the daemon's notice that messages for an observer were dropped (it fell
    ///     behind, or resumed after more than the history holds); by default a line on standard error.
    ///   - onEnded: what is done when an observer's subscription ends by itself (the connection is lost for good,
    ///     or the daemon ended it), so that it receives nothing more; by default a line on standard error.
    public init(
        client: NotifyClient,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        onDropped: (@Sendable (DropNotice) -> Void)? = nil,
        onEnded: (@Sendable (ObservationEnded) -> Void)? = nil
    ) {
        self.client = client
        ownPosts = OwnPosts(isHeard: { client.receivesOwnPublishes })
        observations.startDelivering()
        self.onUndecodable = onUndecodable ?? { StandardError.write("notifycenter: \($0)") }
        self.onDropped =
            onDropped ?? { notice in
                StandardError.write(
                    "notifycenter: \(notice.count) messages of \(notice.topic) were dropped for an observer")
            }
        self.onEnded = onEnded ?? { StandardError.write("notifycenter: \($0)") }
    }

    /// Connects to the daemon (see ``/NotifyBus/NotifyClient/connect(to:group:reconnectWithin:publishBuffer:)``
    /// for the socket and the reconnect).
    /// - Parameters:
    ///   - socketPath: the daemon's socket; by default found as `notify` finds it.
    ///   - receivesOwnPosts: whether this center's observers hear what it posts itself (no, as with
    ///     ``/NotifyBus/Messenger/send(_:from:)``). The daemon leaves them out, and after a reconnect the center
    ///     leaves out those its subscriptions resume with from the daemon's history: every acknowledged
    ///     ``post(_:retain:)`` of its last 4,096; one sent without acknowledgement (``send(_:retain:)``) may come
    ///     back then.
    ///   - reconnectWithin: how long a call waits for the daemon to come back when the connection is lost; nil
    ///     does not reconnect.
    ///   - onUndecodable: what is done with a message on an observer's topics that does not decode as its type;
    ///     by default a line on standard error.
    ///   - onDropped: what is done with the daemon's notice that messages for an observer were dropped; by default
    ///     a line on standard error.
    ///   - onEnded: what is done when an observer's subscription ends by itself; by default a line on standard
    ///     error.
    public static func connect(
        to socketPath: String? = nil,
        receivesOwnPosts: Bool = false,
        reconnectWithin: Duration? = .seconds(30),
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        onDropped: (@Sendable (DropNotice) -> Void)? = nil,
        onEnded: (@Sendable (ObservationEnded) -> Void)? = nil
    ) async throws -> NotifyCenter {
        let client = try await NotifyClient.connect(to: socketPath, reconnectWithin: reconnectWithin)
        if !receivesOwnPosts { try await client.setEcho(false) }
        return NotifyCenter(
            client: client,
            onUndecodable: onUndecodable,
            onDropped: onDropped,
            onEnded: onEnded
        )
    }

    // MARK: - Posting

    /// Posts `message` to its topic, buffered as the topic's latest unless `retain` is false, and waits for the
    /// daemon's acknowledgement.
    /// - Returns: its number in its topic.
    @discardableResult
    nonisolated(nonsending) public func post<Message: NotifyMessage>(_ message: Message, retain: Bool = true) async throws -> UInt64 {
        let topic = message.topic
        let sequence = try await client.publishAcknowledged(Message.codec.encode(message), to: topic, retain: retain)
        ownPosts.posted(sequence, to: topic)
        return sequence
    }

    /// Posts `message` without waiting for an acknowledgement, as `Messenger.send` does: for a stream of
    /// notifications where each round trip would cost more than the post. A refusal by the daemon is thrown by a
    /// later call of ``/NotifyBus/NotifyClient/flush()`` on ``client``.
    nonisolated(nonsending) public func send<Message: NotifyMessage>(_ message: Message, retain: Bool = true) async throws {
        try await client.publish(Message.codec.encode(message), to: message.topic, retain: retain)
    }

    // MARK: - Latest

    /// The buffered latest notification of `Message` (of `topic` for a type whose values derive their topics),
    /// or nil when none is buffered.
    /// - Throws: ``UndecodableNotification`` when the buffered message is not one of the type.
    public func latest<Message: NotifyMessage>(_ type: Message.Type, topic: Topic? = nil) async throws -> Received<Message>? {
        guard let delivery = try await client.latest(topic ?? Message.topic) else { return nil }
        return try Notifications<Message>.decode(delivery, with: Message.codec).get()
    }

    /// Forgets the buffered latest notification of `Message` (of `topic`) without sending anything.
    public func clear<Message: NotifyMessage>(_ type: Message.Type, topic: Topic? = nil) async throws {
        try await client.clear(topic ?? Message.topic)
    }

    /// The last `count` notifications (all for nil) that the daemon's history of `Message`'s topic (`topic`) keeps,
    /// oldest first, each decoded or not.
    public func history<Message: NotifyMessage>(
        _ type: Message.Type,
        topic: Topic? = nil,
        count: Int? = nil
    ) async throws -> [Result<Received<Message>, UndecodableNotification>] {
        try await client.history(of: topic ?? Message.topic, count: count).map {
            Notifications<Message>.decode($0, with: Message.codec)
        }
    }

    // MARK: - Subscribing

    /// The notifications of `Message` posted from now on (on ``NotifyMessage/topics``, or `topics`), decoded, as an
    /// asynchronous sequence; with `latestFirst`, each topic's buffered one comes first; with `since`, what each
    /// topic's history holds after that point. `isIncluded` and `sender` select which are passed on.
    public func notifications<Message: NotifyMessage>(
        of type: Message.Type,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        since: ResumePoint? = nil,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        buffer: SubscriptionBufferLimits = .default
    ) async throws -> Notifications<Message> {
        let subscription = try await client.subscribe(
            to: [topics ?? Message.topics],
            latestFirst: latestFirst,
            since: since,
            buffer: buffer
        )
        return Notifications(
            subscription: subscription,
            selection: selection(Message.self, where: isIncluded, from: sender),
            reportUndecodable: onUndecodable
        )
    }

    // MARK: - Observers

    /// Calls `handler` with each notification of `Message` from now on (with `latestFirst`, each topic's buffered
    /// one first), selected by `isIncluded` and `sender`, until the returned token is cancelled or deallocated.
    /// Returns once the daemon confirmed the subscription.
    public func observe<Message: NotifyMessage>(
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
    public func observe<Message: NotifyMessage & Equatable>(
        _ type: Message.Type,
        equalTo value: Message,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        from sender: Sender? = nil,
        _ handler: @escaping @Sendable (Received<Message>) -> Void
    ) async throws -> ObservationToken {
        try await observe(type, topics: topics, latestFirst: latestFirst, where: { $0 == value }, from: sender, handler)
    }

    /// The same, with `handler` run on the main actor, for observers on the UI side: the center waits for each
    /// call, so it keeps its place in the one order.
    public func observeOnMainActor<Message: NotifyMessage>(
        _ type: Message.Type,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)? = nil,
        _ handler: @escaping @MainActor @Sendable (Received<Message>) -> Void
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
            await MainActor.run { handler(received) }
            return true
        }
        return token(for: id)
    }

    /// Registers `observer`, held weakly, for the notifications of its message type from now on (with
    /// `latestFirst`, each topic's buffered one first), selected by `isIncluded` and `sender`, until it is
    /// deallocated or ``remove(_:)``d. Returns once the daemon confirmed the subscription.
    public func add<Observer: MessengerObserver>(
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
    public func add<Observer: MessengerObserver>(
        _ observer: Observer,
        equalTo value: Observer.Message,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        from sender: Sender? = nil
    ) async throws where Observer.Message: NotifyMessage & Equatable {
        try await add(observer, topics: topics, latestFirst: latestFirst, where: { $0 == value }, from: sender)
    }

    /// Stops every observation of `observer` (an object added, or a token this center gave), at once: nothing is
    /// handed to it after this returns, except in a call already under way on another thread. A token of another
    /// center or of a `Messenger` is not this center's to stop: it is left as it is.
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

    /// How many observations run now (those of observer objects that were deallocated end here).
    public var observerCount: Int {
        observations.sweep()
        return observations.count
    }

    /// Stops every observer, ends every ``notifications(of:topics:latestFirst:since:where:from:buffer:)`` sequence
    /// (the center's `finish()`), and closes the connection.
    public func close() async {
        observations.close()
        await client.close()
    }

    deinit {
        observations.close()
    }

    // MARK: - Delivery

    /// Subscribes for an observer: the events come into the center's one queue, in the connection's order, and the
    /// queue's consumer decodes and selects each and hands it to `deliver`, which returns false once its observer is
    /// gone (the observation then ends); what did not decode and notices of drops go to the handlers for them.
    @discardableResult
    private func start<Message: NotifyMessage>(
        _ type: Message.Type,
        topics: TopicPattern?,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        from sender: Sender?,
        for observer: (any AnyObject & Sendable)?,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)?,
        _ deliver: @escaping @Sendable (Received<Message>) async -> Bool
    ) async throws -> UInt64 {
        // Observer objects that died on topics gone quiet would never learn of it: each new observation ends theirs.
        observations.sweep()
        let selection = selection(Message.self, where: isIncluded, from: sender)
        let onUndecodable = onUndecodable ?? self.onUndecodable
        let onDropped = self.onDropped
        let handle: @Sendable (SubscriptionEvent) async -> Bool = { event in
            switch selection.select(event) {
            case .notification(let received)?: return await deliver(received)
            case .undecodable(let undecodable)?: onUndecodable(undecodable)
            case .dropped(let notice)?: onDropped(notice)
            case nil: break
            }
            return true
        }
        let isAlive = observer.map(Self.isAlive)
        let gauge = SubscriptionGauge(limits: .default)
        let (id, sink) = observations.prepare(gauge: gauge, observer: observer.map(ObjectIdentifier.init), isAlive: isAlive, handle: handle)
        let pattern = topics ?? Message.topics
        let onEnded = self.onEnded
        do {
            let subscription = try await client.subscribe(
                to: [pattern],
                latestFirst: latestFirst,
                gauge: gauge,
                sink: sink,
                finished: { [observations] error in
                    // Only an observation still running is reported: one removed, or of a center closed, was ended
                    // on purpose.
                    guard observations.stop(id) else { return }
                    onEnded(ObservationEnded(topics: pattern, messageType: "\(Message.self)", reason: error))
                }
            )
            observations.started(id, subscription)
        } catch {
            observations.stop(id)
            throw error
        }
        return id
    }

    /// What a subscription of `Message` passes on (see ``NotificationSelection``).
    private func selection<Message: NotifyMessage>(
        _ type: Message.Type,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        from sender: Sender?
    ) -> NotificationSelection<Message> {
        NotificationSelection(codec: Message.codec, isIncluded: isIncluded, sender: sender, ownPosts: ownPosts)
    }

    /// Whether `observer`, held weakly, still exists.
    private static func isAlive(_ observer: any AnyObject & Sendable) -> @Sendable () -> Bool {
        { [weak observer] in observer != nil }
    }

    /// A token that stops observation `id`.
    private func token(for id: UInt64) -> ObservationToken {
        let observations = self.observations
        return ObservationToken(issuer: ObjectIdentifier(observations), tag: id, onCancel: { observations.stop(id) })
    }
}
