import NotifyBus
import Synchronization

/// How an observation starts, and the queues of its own that observers on the main actor or with `async` handlers
/// have.
extension NotifyCenter {
    /// How many notifications an observer with a queue of its own (on the main actor, or an `async` handler) may
    /// have waiting, by default; past that the oldest goes, reported as `onDropped` says.
    public static let ownQueueLimit = 4_096

    /// Subscribes for an observer: the events come into the center's one queue, in the connection's order, and the
    /// queue's consumer decodes and selects each and hands it to `deliver`, which returns false once its observer is
    /// gone (the observation then ends); what did not decode and notices of drops go to the handlers for them.
    /// `onStop` runs when the observation ends; `initial`, when the daemon replayed no latest (`latestFirst`), is
    /// called in its place.
    @discardableResult
    nonisolated(nonsending) func start<Message: NotifyMessage>(
        _ type: Message.Type,
        topics: TopicPattern?,
        latestFirst: Bool,
        where isIncluded: (@Sendable (Message) -> Bool)?,
        from sender: Sender?,
        for observer: (any AnyObject & Sendable)?,
        onUndecodable: (@Sendable (UndecodableNotification) -> Void)?,
        onStop: (@Sendable () -> Void)? = nil,
        initial: (@Sendable () async -> Bool)? = nil,
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
        let pattern = topics ?? Message.topics
        let (id, sink) = observations.prepare(
            gauge: gauge,
            pattern: pattern,
            observer: observer.map(ObjectIdentifier.init),
            isAlive: isAlive,
            onStop: onStop,
            handle: handle
        )
        let gate = initial != nil && latestFirst ? InitialValueGate() : nil
        let gatedSink: @Sendable (SubscriptionEvent) -> Void
        if let gate { gatedSink = { gate.pass($0, to: sink) } } else { gatedSink = sink }
        let onEnded = self.onEnded
        do {
            let subscription = try await client.subscribe(
                to: [pattern],
                latestFirst: latestFirst,
                gauge: gauge,
                sink: gatedSink,
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
        // The daemon's latest came before its confirmation: none came, so the initial value stands in for it.
        if let gate, let initial { gate.ifNoMessageYet { observations.enqueue(initial, for: id) } }
        return id
    }

    /// What a subscription of `Message` passes on (see ``NotificationSelection``).
    func selection<Message: NotifyMessage>(
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
    func token(for id: UInt64) -> ObservationToken {
        let observations = self.observations
        return ObservationToken(issuer: ObjectIdentifier(observations), tag: id, onCancel: { observations.stop(id) })
    }

    /// The notice that an observer's own queue let `received` go.
    func reportDropped<Message>(_ received: Received<Message>) {
        onDropped(DropNotice(topic: received.topic, count: 1, firstSequence: received.sequence, lastSequence: received.sequence, reason: .observer))
    }

    /// A queue on the main actor for an observer, bounded as `policy` says, that reports what it drops.
    func mainActorInbox<Message>(
        _ policy: AsyncStream<Received<Message>>.Continuation.BufferingPolicy,
        _ handler: @escaping @MainActor @Sendable (Received<Message>) -> Void
    ) -> MainActorInbox<Received<Message>> {
        MainActorInbox(limit: .init(policy), onDropped: { [weak self] in self?.reportDropped($0) }, handler: handler)
    }
}

/// Lets an observation's events through, and knows whether a message was among them yet: the initial value goes in
/// only before the first, under the same lock, so that it never comes after one.
final class InitialValueGate: Sendable {
    private let sawMessage = Mutex(false)

    func pass(_ event: SubscriptionEvent, to sink: @Sendable (SubscriptionEvent) -> Void) {
        sawMessage.withLock { saw in
            if case .message = event { saw = true }
            sink(event)
        }
    }

    func ifNoMessageYet(_ body: () -> Void) {
        sawMessage.withLock { saw in
            guard !saw else { return }
            saw = true
            body()
        }
    }
}
