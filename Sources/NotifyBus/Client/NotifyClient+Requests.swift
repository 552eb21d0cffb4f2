public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
import NotifyProtocol

/// The request API: publishing, subscribing, buffered messages, and what the daemon says about itself.
extension NotifyClient {
    // MARK: - Publishing

    /// Publishes `payload` to `topic` without waiting for the daemon to confirm it.
    ///
    /// It returns once the message is encoded into the client's buffer of publishes; the connection writes what
    /// gathered there once per turn of its event loop, with one system call for many publishes, in call order and
    /// before any request made after. When the buffer holds `publishBuffer` bytes (see
    /// ``connect(to:group:reconnectWithin:publishBuffer:)``) that the socket has not taken, it waits until it does:
    /// a daemon that stopped reading holds a publisher back, and nothing is dropped. It runs on its caller's executor
    /// and suspends only then, and once every 1,024 publishes, to let other work of that executor run (a
    /// subscription's consumer on the main actor, beside a publishing loop there). An error the daemon sends back
    /// is thrown by the next ``flush()``, which also waits until the daemon has handled everything published before.
    /// - Parameters:
    ///   - payload: the message, any bytes up to the daemon's `max-payload`.
    ///   - topic: where it is published.
    ///   - retain: whether the message becomes the topic's buffered latest message.
    nonisolated(nonsending) public func publish(_ payload: ByteBuffer, to topic: Topic, retain: Bool = true) async throws {
        try checkSize(payload)
        try await withConnection { link in try await link.outbox.append(CollectionOfOne(payload), to: topic, retain: retain) }
    }

    /// Publishes each of `payloads` to `topic`, in order, without waiting for the daemon to confirm them, as
    /// ``publish(_:to:retain:)-(ByteBuffer,_,_)`` does one: for a stream of messages (`notify send --lines`), one
    /// call for many. Errors the daemon sends back are thrown by the next ``flush()``.
    nonisolated(nonsending) public func publish(_ payloads: [ByteBuffer], to topic: Topic, retain: Bool = true) async throws {
        guard !payloads.isEmpty else { return }
        for payload in payloads { try checkSize(payload) }
        try await withConnection { link in try await link.outbox.append(payloads, to: topic, retain: retain) }
    }

    /// Publishes `text` (as UTF-8) to `topic` without waiting for confirmation (see ``publish(_:to:retain:)-(ByteBuffer,_,_)``).
    nonisolated(nonsending) public func publish(_ text: String, to topic: Topic, retain: Bool = true) async throws {
        try await publish(ByteBuffer(string: text), to: topic, retain: retain)
    }

    /// Publishes `payload` to `topic` and waits until the daemon accepted it.
    /// - Returns: the message's sequence number within its topic.
    @discardableResult
    nonisolated(nonsending) public func publishAcknowledged(_ payload: ByteBuffer, to topic: Topic, retain: Bool = true) async throws -> UInt64 {
        try await publishAcknowledged(payload, to: topic, retain: retain, onReply: nil)
    }

    /// The same, calling `onReply` on the event loop with the daemon's reply as it is read, before this returns on
    /// the caller's executor (a reply to a publish made again after a reconnect included).
    nonisolated(nonsending) package func publishAcknowledged(
        _ payload: ByteBuffer,
        to topic: Topic,
        retain: Bool,
        onReply: (@Sendable (ServerFrame) -> Void)?
    ) async throws -> UInt64 {
        try checkSize(payload)
        let frame = try await withConnection { link in
            try await link.outbox.appendAcknowledged(payload, to: topic, retain: retain, onReply: onReply)
        }
        if case .error(let error) = frame { throw NotifyClientError.refused(error) }
        guard case .ok(_, let sequence?) = frame else { throw unexpected(frame, for: "PUB ack") }
        return sequence
    }

    /// Publishes `text` (as UTF-8) to `topic` and waits until the daemon accepted it.
    @discardableResult
    nonisolated(nonsending) public func publishAcknowledged(_ text: String, to topic: Topic, retain: Bool = true) async throws -> UInt64 {
        try await publishAcknowledged(ByteBuffer(string: text), to: topic, retain: retain)
    }

    /// Waits until the daemon has handled everything sent before, and throws the first error that a
    /// fire-and-forget ``publish(_:to:retain:)-(ByteBuffer,_,_)`` received since the last flush (saying how many
    /// were refused when more were).
    nonisolated(nonsending) public func flush() async throws {
        let errors = try await withConnection { link in
            let frame = try await self.exchange(.ping, on: link)
            guard case .pong = frame else { throw self.unexpected(frame, for: "PING") }
            let handler = link.handler
            return try await link.channel.eventLoop.submit { handler.value.takeDeferredErrors() }.get()
        }
        guard let first = errors.first else { return }
        if errors.count == 1 { throw NotifyClientError.refused(first) }
        throw NotifyClientError(.refused, "\(errors.count) publishes were refused; the first: \(first.message)", refusal: first)
    }

    // MARK: - Subscribing

    /// Subscribes to `patterns` and returns the matching messages, and notices of messages dropped, as they come.
    ///
    /// With `latestFirst`, the buffered message of each matching topic comes first, then live ones, with no gap and
    /// no repeat in between. With `since` (a daemon of protocol 3), what each matching topic's history holds after
    /// that point comes first instead, after a ``SubscriptionEvent/dropped(_:)`` for what it no longer holds. The subscription holds at most `buffer` for a consumer that falls behind; past it, the
    /// daemon keeps the rest and `overflow` says what it does when that is full too (see ``/NotifyProtocol/OverflowPolicy``); what
    /// it drops is announced as ``SubscriptionEvent/dropped(_:)``. Subscriptions of one client share its
    /// connection: while one of them is full, the others wait too (take a client per independent consumer).
    /// The subscription ends when the sequence is no longer iterated (the daemon is told). When the connection is
    /// lost, a client that reconnects carries it over and resumes it (see ``connect(to:group:reconnectWithin:publishBuffer:)``;
    /// with a daemon of protocol 3); one that does not ends it with the error.
    nonisolated(nonsending) public func subscribe(
        to patterns: [TopicPattern],
        latestFirst: Bool = false,
        since: ResumePoint? = nil,
        overflow: OverflowPolicy = .dropOldest,
        buffer: SubscriptionBufferLimits = .default
    ) async throws -> NotifySubscription {
        let inbox = SubscriptionInbox()
        let gauge = SubscriptionGauge(limits: buffer)
        let handle = try await open(
            patterns,
            options: SubscribeOptions(latestFirst: latestFirst, since: since, overflow: overflow),
            gauge: gauge,
            output: .inbox(inbox)
        )
        return NotifySubscription(inbox: inbox, gauge: gauge, handle: handle)
    }

    /// Subscribes to `patterns` with `sink` instead of a sequence: it is called on the connection's event loop with
    /// each event, in the order the events of all such subscriptions of this client arrive, and must only hand it
    /// on (to one queue, say). Whoever takes an event counts it out of `gauge` and calls the handle's `caughtUp`
    /// when `take` says so, as ``NotifySubscription`` does; `finished` is called once when the subscription ends by
    /// itself (the connection is gone for good). For NotifyCenter, whose observers are called in that one order.
    nonisolated(nonsending) package func subscribe(
        to patterns: [TopicPattern],
        latestFirst: Bool,
        since: ResumePoint? = nil,
        gauge: SubscriptionGauge,
        sink: @escaping @Sendable (SubscriptionEvent) -> Void,
        finished: @escaping @Sendable ((any Error)?) -> Void
    ) async throws -> SubscriptionHandle {
        try await open(
            patterns,
            options: SubscribeOptions(latestFirst: latestFirst, since: since),
            gauge: gauge,
            output: .sink(yield: sink, finish: finished)
        )
    }

    /// Makes a subscription whose events go to `output`; the handle ends it.
    nonisolated(nonsending) private func open(
        _ patterns: [TopicPattern],
        options: SubscribeOptions,
        gauge: SubscriptionGauge,
        output: SubscriptionOutput
    ) async throws -> SubscriptionHandle {
        let link = try await current()
        let handler = link.handler
        let eventLoop = link.channel.eventLoop
        let since = options.since
        if since != nil { try requireResuming("resuming from a topic's history (since)") }
        let replays = options.latestFirst || since != nil
        // A client that reconnects carries its subscriptions over, if the daemon can resume them.
        let route = reconnectWithin != nil && link.greeting.version >= ServerGreeting.resumingVersion ? SubscriptionRoute() : nil
        let (id, replies) = try await eventLoop.submit {
            let local = ClientChannelHandler.LocalSubscription(patterns: patterns, output: output, gauge: gauge)
            if let route {
                local.resume = .init(since: since, overflow: options.overflow, connectedAt: .now(), route: route)
                local.resume!.delivered.start(at: since, now: .now())
            }
            let (id, newPatterns) = handler.value.addSubscription(local)
            if let route { route.move(to: handler.value, on: eventLoop, id: id) }
            // With latestFirst or since, every pattern is asked for what it replays, even one already held.
            let replies = (replays ? patterns : newPatterns).map { pattern in
                let reply = eventLoop.makePromise(of: ServerFrame.self)
                handler.value.send(.subscribe(pattern, options), reply: reply, written: nil, replaysFor: replays ? id : nil)
                return reply.futureResult
            }
            return (id, replies)
        }.get()
        let handle: SubscriptionHandle
        if let route {
            handle = SubscriptionHandle(caughtUp: { route.caughtUp() }, end: { route.end() })
        } else {
            handle = SubscriptionHandle(
                caughtUp: { eventLoop.execute { handler.value.subscriptionCaughtUp(id) } },
                end: { eventLoop.execute { handler.value.removeSubscription(id) } }
            )
        }
        for reply in replies {
            let frame = try await reply.get()
            if case .error(let error) = frame {
                handle.end()
                output.finish(nil)
                throw NotifyClientError.refused(error)
            }
        }
        return handle
    }

    // MARK: - Buffered messages

    /// The last `count` messages (all for nil) that `topic`'s history keeps, oldest first; empty when it keeps none
    /// (64 messages per topic by default: see the daemon's `--history-messages`). Needs a daemon of protocol 3.
    nonisolated(nonsending) public func history(of topic: Topic, count: Int? = nil) async throws -> [Delivery] {
        try requireResuming("reading a topic's history")
        return try await withConnection { link in
            let promise = link.channel.eventLoop.makePromise(of: [Delivery].self)
            let handler = link.handler
            link.channel.eventLoop.execute { handler.value.collect(.history(topic, count: count), into: promise) }
            return try await promise.futureResult.get()
        }
    }

    /// The buffered latest message of `topic`, or nil when nothing is buffered.
    nonisolated(nonsending) public func latest(_ topic: Topic) async throws -> Delivery? {
        let frame = try await exchange(.latest(topic), notFoundIsNil: true)
        switch frame {
        case .latest(_, let delivery): return delivery
        case nil: return nil
        case let other?: throw unexpected(other, for: "LATEST")
        }
    }

    /// Forgets the buffered message of `topic` without sending anything.
    nonisolated(nonsending) public func clear(_ topic: Topic) async throws {
        let frame = try await exchange(.clear(topic))
        guard case .ok = frame else { throw unexpected(frame, for: "CLEAR") }
    }

    // MARK: - Introspection

    /// The topics the daemon knows, all or those matching `pattern`, in name order.
    nonisolated(nonsending) public func topics(matching pattern: TopicPattern? = nil) async throws -> [TopicInfo] {
        var all: [TopicInfo] = []
        var after: Topic?
        while true {
            let frame = try await exchange(.topics(pattern, after: after))
            guard case .topics(_, let page) = frame else { throw unexpected(frame, for: "TOPICS") }
            all += page
            after = Command.topicsPage(after: page, serverVersion: greeting.version)
            if after == nil { return all }
        }
    }

    /// The daemon's counters.
    nonisolated(nonsending) public func stats() async throws -> ServerStats {
        let frame = try await exchange(.stats)
        guard case .stats(_, let stats) = frame else { throw unexpected(frame, for: "STATS") }
        return stats
    }

    /// Whether this client receives its own publishes (``setEcho(_:)``; yes unless told otherwise).
    public var receivesOwnPublishes: Bool { echo.withLockedValue { $0 } }

    /// Whether this connection receives its own publishes (it does unless told otherwise).
    nonisolated(nonsending) public func setEcho(_ enabled: Bool) async throws {
        echo.withLockedValue { $0 = enabled }
        let frame = try await exchange(.setEcho(enabled))
        guard case .ok = frame else { throw unexpected(frame, for: "OPT") }
    }

    /// Closes the connection. Subscriptions end normally; calls still waiting fail.
    public func close() async {
        isClosed.withLockedValue { $0 = true }
        let link = self.link.withLockedValue { $0 }
        let handler = link.handler
        link.channel.eventLoop.execute { handler.value.close() }
        try? await link.channel.closeFuture.get()
    }
}
