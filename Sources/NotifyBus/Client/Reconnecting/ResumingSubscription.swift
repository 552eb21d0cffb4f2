import NIOConcurrencyHelpers
import NotifyProtocol

/// A subscription that outlives its connections: when the daemon goes away (stopped, restarted, upgraded, crashed)
/// it connects again, backing off from 50 ms to at most 2 s between attempts (with jitter, and starting over only
/// after a connection lasted 10 s: see `ReconnectBackoff`), subscribes again, and resumes after
/// the last message it delivered, from the topics' history (`SUB … since=`). Its consumer sees one sequence: each
/// message once, in order per topic, and a ``SubscriptionEvent/dropped(_:)`` for what the history no longer held.
///
/// Resuming needs a daemon that keeps history for the topics (`--history-messages`: 64 messages per topic by default, `0` for none): without it,
/// what was published while the subscription was away is announced as dropped (by time the daemon cannot tell which
/// of a topic's messages came after the point, so the notice may name messages published before it too; those this
/// subscription delivered already are left out of it).
///
/// It resumes by time, for every pattern alike: after the newest message it delivered (less a microsecond, so that
/// messages of other topics published in the same microsecond are not skipped), or after the moment it first
/// subscribed. Messages it already delivered are recognized by their topic and sequence number and not delivered
/// again. It ends when its consumer stops iterating, and throws only for what reconnecting cannot mend (a
/// refusal: a pattern the user may not read, say; or, under ``/NotifyProtocol/OverflowPolicy/disconnect``, being disconnected for
/// falling behind, which the daemon does without a word, as a crash would: such a subscription reconnects only
/// when the daemon said it was going away). Each iterator has its own connection.
public struct ResumingSubscription: AsyncSequence, Sendable {
    public typealias Element = SubscriptionEvent

    /// What happened to the connection under the subscription, for a caller that says so to its user.
    public enum ConnectionChange: Sendable {
        /// The connection was lost; the subscription is connecting again.
        case lost(NotifyClientError)
        /// It is connected again and resumed.
        case resumed
    }

    let socketPath: String?
    let patterns: [TopicPattern]
    let latestFirst: Bool
    let since: ResumePoint?
    let overflow: OverflowPolicy
    let buffer: SubscriptionBufferLimits
    let onConnectionChange: @Sendable (ConnectionChange) -> Void

    /// Creates the subscription; it connects when iterated.
    /// - Parameters:
    ///   - socketPath: the daemon's socket, as for ``NotifyClient/connect(to:group:reconnectWithin:publishBuffer:)``.
    ///   - patterns: the topics and patterns to follow.
    ///   - latestFirst: start with the buffered message of each matching topic (the first connection only).
    ///   - since: start from the history after this point (the first connection only).
    ///   - overflow: what the daemon does when this subscriber falls behind.
    ///   - buffer: how much the subscription holds for a consumer slower than the publishers.
    ///   - onConnectionChange: called when the connection is lost and when the subscription resumed.
    public init(
        socketPath: String? = nil,
        patterns: [TopicPattern],
        latestFirst: Bool = false,
        since: ResumePoint? = nil,
        overflow: OverflowPolicy = .dropOldest,
        buffer: SubscriptionBufferLimits = .default,
        onConnectionChange: @escaping @Sendable (ConnectionChange) -> Void = { _ in }
    ) {
        self.socketPath = socketPath
        self.patterns = patterns
        self.latestFirst = latestFirst
        self.since = since
        self.overflow = overflow
        self.buffer = buffer
        self.onConnectionChange = onConnectionChange
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: self)
    }

    /// Connects at its first `next()`, and again whenever the connection is lost, resuming after the last event it
    /// returned.
    public struct Iterator: AsyncIteratorProtocol, EventsAtHand {
        let subscription: ResumingSubscription
        private let connection = Connection()
        private var events: NotifySubscription.Iterator?
        private var delivered = DeliveredMessages()
        /// When the current connection subscribed: a message older than that is a replay, which may stop half-way
        /// if the connection does, so it does not move the resume point.
        private var connectedAt = PublishTime(microsecondsSinceEpoch: 0)
        private var isFirstConnection = true
        /// The pauses between attempts, kept across connections: one lost at once does not start them over.
        private var backoff = ReconnectBackoff()
        /// When the current connection was made.
        private var connectedSince = ContinuousClock.now

        init(subscription: ResumingSubscription) {
            self.subscription = subscription
        }

        /// Whether the next call to ``next()`` returns without waiting (it may still skip a repeat).
        package mutating func nextAtHand() -> SubscriptionEvent? {
            while let event = events?.nextAtHand() {
                if let passed = pass(event) { return passed }
            }
            return nil
        }

        /// What of `event` goes to the consumer: nil for a message it had before the connection was lost, and a drop
        /// notice less what it had.
        private mutating func pass(_ event: consuming SubscriptionEvent) -> SubscriptionEvent? {
            switch event {
            case .message(let delivery):
                if delivered.isRepeat(delivery) { return nil }
                delivered.record(delivery, isLive: delivery.time >= connectedAt)
                return event
            case .dropped(let notice):
                // Of what was delivered already, nothing was missed.
                return delivered.missed(notice).map { .dropped($0) }
            }
        }

        public mutating func next() async throws -> SubscriptionEvent? {
            while true {
                if events == nil { try await connect() }
                let event: SubscriptionEvent?
                do {
                    event = try await events!.next()
                } catch let error as NotifyClientError where error.kind == .connectionClosed || error.kind == .unreachable {
                    // Under `disconnect`, a connection closed without the daemon saying it goes away is this
                    // subscriber's own end for falling behind, which it asked for.
                    if subscription.overflow == .disconnect && error.refusal?.code != .unavailable { throw error }
                    events = nil
                    await connection.close()
                    subscription.onConnectionChange(.lost(error))
                    if let pause = backoff.lost(after: ContinuousClock.now - connectedSince) { try await Task.sleep(for: pause) }
                    continue
                }
                guard let event else { return nil }
                if let passed = pass(event) { return passed }
            }
        }

        /// Connects and subscribes, again and again with a growing pause until it works or cannot.
        private mutating func connect() async throws {
            while true {
                try Task.checkCancellation()
                do {
                    // It reconnects itself, and tells its caller so: its client does not.
                    let client = try await NotifyClient.connect(to: subscription.socketPath, reconnectWithin: nil)
                    await connection.set(client)
                    let since: ResumePoint?
                    let now = PublishTime.now()
                    if isFirstConnection {
                        delivered.start(at: subscription.since, now: now)
                        since = subscription.since
                    } else {
                        since = delivered.resumePoint(for: subscription.patterns, startedAt: subscription.since)
                    }
                    connectedAt = now
                    let events = try await client.subscribe(
                        to: subscription.patterns,
                        latestFirst: isFirstConnection && subscription.latestFirst,
                        since: since,
                        overflow: subscription.overflow,
                        buffer: subscription.buffer
                    )
                    self.events = events.makeAsyncIterator()
                    connectedSince = .now
                    if !isFirstConnection { subscription.onConnectionChange(.resumed) }
                    isFirstConnection = false
                    return
                } catch let error as NotifyClientError where error.kind == .connectionClosed || error.kind == .unreachable {
                    await connection.close()
                    if isFirstConnection { throw error }
                    try await Task.sleep(for: backoff.pause())
                }
            }
        }
    }

    /// The iterator's current client, closed when the iterator is let go of.
    final class Connection: Sendable {
        private let client = NIOLockedValueBox<NotifyClient?>(nil)

        func set(_ client: NotifyClient) async {
            await close()
            self.client.withLockedValue { $0 = client }
        }

        func close() async {
            let client = self.client.withLockedValue { client in
                defer { client = nil }
                return client
            }
            await client?.close()
        }

        deinit {
            if let client = client.withLockedValue({ $0 }) { Task { await client.close() } }
        }
    }
}
