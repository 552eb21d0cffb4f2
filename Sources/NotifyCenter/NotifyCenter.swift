// `import NotifyCenter` is all a service writes: the client's names (Topic, NotifyClient, …) come with it.
@_exported public import NotifyBus
import NIOCore
import Synchronization
import NotifySystem

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
/// What ``/NotifyBus/Messenger`` offers, under the same names (``/NotifyBus/MessageChannel`` is the protocol both
/// speak, through ``channel(for:topic:initial:)``), and where it differs across processes:
/// - Observers are closures kept by an ``/NotifyBus/ObservationToken`` (cancelled when it is deallocated), closures
///   kept by an owner that is handed to them (`observe(_:owner:…)`),
///   or objects held weakly (``add(_:topics:latestFirst:where:from:onUndecodable:)``), selected by value, by
///   predicate or by sender; each form also runs on the main actor (a ``/NotifyBus/MainActorObserver``,
///   `observeOnMainActor`), and a handler may be `async`.
/// - Observers of a center are called one at a time, never concurrently, in one order: the order in which the
///   daemon's deliveries reach the center's connection (each topic's in the order the daemon numbered them), every
///   observer's calls in that one sequence, as a messenger calls its observers in the order of its sends. Unlike a
///   messenger's, an observer receives the notifications the daemon delivers after its subscription is confirmed,
///   which `observe` waits for: what is posted after it returns is never missed. A slow observer holds back the
///   others, as in a messenger (and then the connection: the daemon's backpressure); one on the main actor or with
///   an `async` handler has a bounded queue of its own instead, so a busy main actor holds back nobody, and what
///   its queue drops is reported as `onDropped` says (reason ``/NotifyProtocol/DropReason/observer``).
/// - ``latest(_:topic:)`` is the daemon's buffered message, typed; ``clear(_:topic:)`` forgets it without sending;
///   ``sendLatest(_:topic:)`` hands it to this center's observers again (not to other processes: posting it again
///   would make it a new message of this one).
/// - A center does not hear its own posts unless it is made with `receivesOwnPosts`: the daemon leaves them out for
///   its connection (other centers of the same process are other connections, and hear them). One that hears them
///   leaves a post out for the observer that made it with ``post(_:retain:from:)``, as `Messenger.send(_:from:)` does.
/// - ``remove(_:)`` stops an observer's deliveries at once; one already handed to it finishes. `dispose` is the
///   same: removal costs the same from anywhere. ``finish()`` ends the sequences and keeps the observers;
///   ``close()`` ends everything and the connection.
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

    let onUndecodable: @Sendable (UndecodableNotification) -> Void
    let onDropped: @Sendable (DropNotice) -> Void
    let onEnded: @Sendable (ObservationEnded) -> Void
    /// The observations running, and the one queue their events come in by, in the connection's order.
    let observations = ObservationTable()
    /// What this center posted, to be left out of what its subscriptions resume with while it does not hear its own.
    let ownPosts: OwnPosts
    /// The sequences it made, for ``finish()``: held weakly, as they end once nobody iterates them.
    private let sequences = Mutex<[WeakReference]>([])

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
        self.onUndecodable = onUndecodable ?? { StandardError.writeLine("notifycenter: \($0)") }
        self.onDropped =
            onDropped ?? { notice in
                StandardError.writeLine(
                    "notifycenter: \(notice.count) messages of \(notice.topic) were dropped for an observer")
            }
        self.onEnded = onEnded ?? { StandardError.writeLine("notifycenter: \($0)") }
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
        try await post(Message.codec.encode(message), to: message.topic, retain: retain, from: nil)
    }

    /// Posts `message` as ``post(_:retain:)`` does, except to `sender`: an observer object or owner of this center,
    /// or a token it gave, is not handed its own post (`Messenger.send(_:from:)`). The others hear it as they hear any
    /// post of this center: only if the center hears its own posts (`receivesOwnPosts`).
    @discardableResult
    nonisolated(nonsending) public func post<Message: NotifyMessage>(
        _ message: Message,
        retain: Bool = true,
        from sender: AnyObject
    ) async throws -> UInt64 {
        try await post(Message.codec.encode(message), to: message.topic, retain: retain, from: sender)
    }

    /// Posts `payload` to `topic`, noting it as this center's own (and `sender`'s, when given).
    nonisolated(nonsending) func post(_ payload: ByteBuffer, to topic: Topic, retain: Bool, from sender: AnyObject?) async throws -> UInt64 {
        guard let sender else {
            let sequence = try await client.publishAcknowledged(payload, to: topic, retain: retain)
            ownPosts.posted(sequence, to: topic)
            return sequence
        }
        let settlement = observations.postStarting(to: topic, by: observations.sender(sender))
        let sequence: UInt64
        do {
            sequence = try await client.publishAcknowledged(payload, to: topic, retain: retain) { reply in
                // On the event loop, as the reply is read: the hold for it ends in the connection's order.
                if case .ok(_, let sequence?) = reply { settlement.settle(sequence) } else { settlement.settle(nil) }
            }
        } catch {
            settlement.settle(nil)
            throw error
        }
        settlement.settle(sequence)
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
    nonisolated(nonsending) public func latest<Message: NotifyMessage>(_ type: Message.Type, topic: Topic? = nil) async throws -> Received<Message>? {
        guard let delivery = try await client.latest(topic ?? Message.topic) else { return nil }
        return try Notifications<Message>.decode(delivery, with: Message.codec).get()
    }

    /// Forgets the buffered latest notification of `Message` (of `topic`) without sending anything.
    nonisolated(nonsending) public func clear<Message: NotifyMessage>(_ type: Message.Type, topic: Topic? = nil) async throws {
        try await client.clear(topic ?? Message.topic)
    }

    /// Hands the daemon's buffered latest notification of `Message`'s topic (`topic`) again to this center's
    /// observers of that topic, in its place among what they receive, but to the one that posted it
    /// (``post(_:retain:from:)``) and not after a newer one reached them meanwhile. Other processes are not sent it:
    /// posting it again would make it a new message, of this process.
    /// - Returns: whether the daemon held one.
    @discardableResult
    nonisolated(nonsending) public func sendLatest<Message: NotifyMessage>(_ type: Message.Type, topic: Topic? = nil) async throws -> Bool {
        let topic = topic ?? Message.topic
        observations.resendStarting(for: topic)
        let latest: Delivery?
        do {
            latest = try await client.latest(topic)
        } catch {
            observations.resend(nil, for: topic)
            throw error
        }
        observations.resend(latest, for: topic)
        return latest != nil
    }

    /// The last `count` notifications (all for nil) that the daemon's history of `Message`'s topic (`topic`) keeps,
    /// oldest first, each decoded or not.
    nonisolated(nonsending) public func history<Message: NotifyMessage>(
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
    /// topic's history holds after that point. `isIncluded` and `sender` select which are passed on. It ends when it
    /// is no longer iterated, with ``finish()`` or ``close()``, or when the connection is lost for good.
    nonisolated(nonsending) public func messages<Message: NotifyMessage>(
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
        sequences.withLock { sequences in
            sequences.removeAll { $0.object == nil }
            sequences.append(WeakReference(subscription.consumer))
        }
        return Notifications(
            subscription: subscription,
            selection: selection(Message.self, where: isIncluded, from: sender),
            reportUndecodable: onUndecodable
        )
    }

    /// The old name of ``messages(of:topics:latestFirst:since:where:from:buffer:)``.
    @available(*, deprecated, renamed: "messages(of:topics:latestFirst:since:where:from:buffer:)")
    public func notifications<Message: NotifyMessage>(
        of type: Message.Type,
        topics: TopicPattern? = nil,
        latestFirst: Bool = false,
        since: ResumePoint? = nil,
        where isIncluded: (@Sendable (Message) -> Bool)? = nil,
        from sender: Sender? = nil,
        buffer: SubscriptionBufferLimits = .default
    ) async throws -> Notifications<Message> {
        try await messages(of: type, topics: topics, latestFirst: latestFirst, since: since, where: isIncluded, from: sender, buffer: buffer)
    }

    /// A channel of `Message` on `topic` (its type's ``NotifyMessage/topic-type.property`` by default): this center as a
    /// ``/NotifyBus/MessageChannel``, the protocol a `Messenger` speaks too, so that code written against it runs
    /// on either. With `initial`, the channel's ``NotifyChannel/latest`` is `initial` while the daemon holds none for
    /// the topic, and an observer that starts with the latest is handed it then.
    public func channel<Message: NotifyMessage>(
        for type: Message.Type,
        topic: Topic? = nil,
        initial: Message? = nil
    ) -> NotifyChannel<Message> {
        NotifyChannel(center: self, topic: topic ?? Message.topic, initial: initial)
    }

    // MARK: - Ending

    /// Ends every sequence of this center (``messages(of:topics:latestFirst:since:where:from:buffer:)``: their
    /// `for try await` loops finish after what they hold); its observers go on, and sequences asked for later are
    /// new ones (a messenger's `finish()` ends those too; a center has its connection to give them).
    public func finish() {
        let all = sequences.withLock { sequences in
            defer { sequences.removeAll() }
            return sequences.compactMap { $0.object as? NotifySubscription.Consumer }
        }
        for consumer in all { consumer.stop() }
    }

    /// Stops every observer, ends every sequence (``finish()``), and closes the connection.
    public func close() async {
        finish()
        observations.close()
        await client.close()
    }

    deinit {
        observations.close()
    }
}
