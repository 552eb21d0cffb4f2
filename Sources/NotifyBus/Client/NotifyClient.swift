public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix

/// A connection to notifyd, for any Swift program: publish, subscribe, read and clear buffered messages, list
/// topics, read counters.
///
/// ```swift
/// let client = try await NotifyClient.connect()
/// try await client.publishAcknowledged("done", to: Topic("backup.status"))
/// for try await delivery in try await client.subscribe(to: [TopicPattern("backup.>")]).messages {
///     print(delivery.topic, delivery.text ?? "")
/// }
/// ```
///
/// All methods may be called from any task; requests are sent in call order on one connection, and the daemon
/// handles them in that order. Errors thrown are ``NotifyClientError``s. When the daemon goes away (a restart, an
/// upgrade), the client connects again by itself on its next call (see ``connect(to:group:reconnectWithin:)``).
public final class NotifyClient: Sendable {
    /// The socket this client connected to.
    public let socketPath: String
    /// What the daemon announced on connect (on the last connect, after a reconnect): protocol version and limits.
    public var greeting: ServerGreeting { link.withLockedValue { $0 }.greeting }

    /// One connection to the daemon: a client has one at a time, and a new one after a reconnect.
    struct Link: Sendable {
        let channel: any Channel
        let handler: NIOLoopBound<ClientChannelHandler>
        /// Where its fire-and-forget publishes gather (see ``PublishOutbox``).
        let outbox: PublishOutbox
        let greeting: ServerGreeting
        /// When it was made: one lost soon after does not start the reconnect pauses over.
        let madeAt = ContinuousClock.now
    }

    private let link: NIOLockedValueBox<Link>
    private let group: any EventLoopGroup
    /// How long a call waits for the daemon to come back; nil when the client does not reconnect.
    private let reconnectWithin: Duration?
    /// The connection being made to replace a lost one, which every call that needs it waits for.
    private let reconnecting = NIOLockedValueBox<Task<Link, any Error>?>(nil)
    /// The pauses between attempts to reconnect, kept across connections (see ``ReconnectBackoff``).
    private let backoff = NIOLockedValueBox(ReconnectBackoff())
    /// What ``setEcho(_:)`` asked for last, for a new connection to be told too.
    private let echo = NIOLockedValueBox(true)
    private let isClosed = NIOLockedValueBox(false)
    /// The bound on each connection's ``PublishOutbox``.
    private let publishBuffer: Int

    private init(socketPath: String, link: Link, group: any EventLoopGroup, reconnectWithin: Duration?, publishBuffer: Int) {
        self.socketPath = socketPath
        self.link = NIOLockedValueBox(link)
        self.group = group
        self.reconnectWithin = reconnectWithin
        self.publishBuffer = publishBuffer
    }

    /// The default bound on what fire-and-forget publishes may hold in the client before ``publish(_:to:retain:)-(ByteBuffer,_,_)``
    /// waits for the socket: 4 MiB.
    public static let defaultPublishBuffer = 4 << 20

    deinit {
        link.withLockedValue { $0 }.channel.close(promise: nil)
    }

    /// Connects to the daemon and waits for its greeting.
    ///
    /// When the daemon goes away later (stopped, restarted, upgraded, crashed), the next call connects again by
    /// itself, backing off from 50 ms to at most 2 s between attempts for up to `reconnectWithin`, and a call that
    /// was under way when the connection was lost is made again on the new one, once: so a publish whose
    /// acknowledgement was lost with the connection may arrive twice (at least once), and fire-and-forget publishes
    /// the client had not yet written go first on the new connection (those written into a connection that was
    /// already going, which the daemon never read, are lost, as is any fire-and-forget publish a daemon dies
    /// before reading; so are errors the daemon sent back on a lost connection for earlier fire-and-forget
    /// publishes, which ``flush()`` would have thrown). Its
    /// subscriptions are carried over to the new
    /// connection at once, however long the daemon takes to come back (as long as they are iterated), and resume
    /// from the daemon's history after the last message each delivered, leaving out what they had: each message
    /// once, in order, and a ``SubscriptionEvent/dropped(_:)`` for what the history no longer holds (one under
    /// ``OverflowPolicy/disconnect`` that the daemon closed for falling behind ends instead, as it asked). The first
    /// connection is not retried: a daemon that is not there is an error at once.
    /// - Parameters:
    ///   - socketPath: the socket; nil resolves it as ``SocketPath/resolveForClient(explicit:environment:uid:)`` says.
    ///   - group: the event loops to use; the process-wide NIO singleton when nil.
    ///   - reconnectWithin: how long a call waits for the daemon to come back; nil never reconnects (each call after
    ///     the connection is lost throws, as a one-shot command wants).
    ///   - publishBuffer: how many bytes of fire-and-forget publishes the client holds, not yet taken by the socket,
    ///     before ``publish(_:to:retain:)-(ByteBuffer,_,_)`` waits for it to take them.
    public static func connect(
        to socketPath: String? = nil,
        group: (any EventLoopGroup)? = nil,
        reconnectWithin: Duration? = .seconds(30),
        publishBuffer: Int = NotifyClient.defaultPublishBuffer
    ) async throws -> NotifyClient {
        let path = SocketPath.resolveForClient(explicit: socketPath)
        if let problem = SocketPath.fallbackProblem(path) {
            throw NotifyClientError(.notPermitted, problem)
        }
        let group = group ?? MultiThreadedEventLoopGroup.singleton
        let link = try await open(path, group: group, publishBuffer: publishBuffer)
        let client = NotifyClient(socketPath: path, link: link, group: group, reconnectWithin: reconnectWithin, publishBuffer: publishBuffer)
        if reconnectWithin != nil { try await client.carrySubscriptions(from: link) }
        return client
    }

    /// Has `link` hand its subscriptions over to the client when it is lost, for the next connection to resume.
    private func carrySubscriptions(from link: Link) async throws {
        let handler = link.handler
        try await link.channel.eventLoop.submit { [weak self] in
            handler.value.handOver = { subscriptions, _ in self?.resume(subscriptions) }
        }.get()
    }

    /// Resumes `subscriptions`, handed over by a lost connection, on the next one: as long as they are iterated,
    /// they wait for the daemon to come back, however long that takes.
    private func resume(_ subscriptions: [ClientChannelHandler.LocalSubscription]) {
        Task {
            while true {
                if isClosed.withLockedValue({ $0 }) || subscriptions.allSatisfy({ $0.resume!.route.isEnded }) {
                    for subscription in subscriptions { subscription.output.finish(nil) }
                    return
                }
                do {
                    let link = try await current()
                    let handler = link.handler
                    let now = PublishTime.now()
                    try await link.channel.eventLoop.submit {
                        for subscription in subscriptions { handler.value.adopt(subscription, connectedAt: now) }
                    }.get()
                    return
                } catch let error as NotifyClientError where Self.isLostConnection(error) {
                    continue
                } catch {
                    for subscription in subscriptions { subscription.output.finish(error) }
                    return
                }
            }
        }
    }

    /// Connects to the daemon at `path` and waits for its greeting.
    private static func open(_ path: String, group: any EventLoopGroup, publishBuffer: Int) async throws -> Link {
        // The handler is kept as it is added: a daemon that refuses the connection closes it at once, and a
        // lookup in the pipeline afterwards would find it already gone, with the refusal.
        let added = NIOLockedValueBox<(NIOLoopBound<ClientChannelHandler>, PublishOutbox, EventLoopFuture<ServerGreeting>)?>(nil)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                // One read of the socket at a time, so a subscription that fills up stops the reading within 64 KiB.
                .channelOption(.maxMessagesPerRead, value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = ClientChannelHandler(greeting: channel.eventLoop.makePromise(of: ServerGreeting.self))
                        let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                        let eventLoop = channel.eventLoop
                        let outbox = PublishOutbox(limit: publishBuffer) { eventLoop.execute { bound.value.drainOutbox() } }
                        handler.outbox = outbox
                        try channel.pipeline.syncOperations.addHandler(handler)
                        added.withLockedValue { $0 = (bound, outbox, handler.greetingFuture) }
                    }
                }
                .withConnectedSocket(try ClientSocket.connect(to: path, nonBlocking: true))
                .get()
        } catch let error as NotifyClientError {
            throw error
        } catch {
            throw NotifyClientError.connecting(to: path, errno: (error as? IOError)?.errnoCode, detail: "\(error)")
        }
        guard let (handler, outbox, greeting) = added.withLockedValue({ $0 }) else {
            channel.close(promise: nil)
            throw NotifyClientError(.protocolViolation, "the connection to \(path) was set up without its handler")
        }
        #if os(Linux)
        if SocketPath.isInFallback(path) {
            let peer: KernelCredentials? = try? await (channel as? any SocketOptionProvider)?
                .unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)).get()
            if let problem = SocketPath.fallbackPeerProblem(path, peerUID: peer?.uid) {
                channel.close(promise: nil)
                throw NotifyClientError(.notPermitted, problem)
            }
        }
        #endif
        do {
            let serverGreeting = try await greeting.get()
            return Link(channel: channel, handler: handler, outbox: outbox, greeting: serverGreeting)
        } catch let error as NotifyClientError where error.kind == .refused {
            channel.close(promise: nil)
            throw error
        } catch {
            channel.close(promise: nil)
            throw NotifyClientError(.unreachable, "\(path) accepted the connection but sent no greeting: is a notifyd listening there? (\(error))")
        }
    }

    // MARK: - Publishing

    /// Publishes `payload` to `topic` without waiting for the daemon to confirm it.
    ///
    /// It returns once the message is encoded into the client's buffer of publishes; the connection writes what
    /// gathered there once per turn of its event loop, with one system call for many publishes, in call order and
    /// before any request made after. When the buffer holds `publishBuffer` bytes (see
    /// ``connect(to:group:reconnectWithin:publishBuffer:)``) that the socket has not taken, it waits until it does:
    /// a daemon that stopped reading holds a publisher back, and nothing is dropped. An error the daemon sends back
    /// is thrown by the next ``flush()``, which also waits until the daemon has handled everything published before.
    /// - Parameter retain: whether the message becomes the topic's buffered latest message.
    public func publish(_ payload: ByteBuffer, to topic: Topic, retain: Bool = true) async throws {
        try checkSize(payload)
        try await withConnection { link in try await link.outbox.append(CollectionOfOne(payload), to: topic, retain: retain) }
    }

    /// Publishes each of `payloads` to `topic`, in order, without waiting for the daemon to confirm them, as
    /// ``publish(_:to:retain:)-(ByteBuffer,_,_)`` does one: for a stream of messages (`notify send --lines`), one
    /// call for many. Errors the daemon sends back are thrown by the next ``flush()``.
    public func publish(_ payloads: [ByteBuffer], to topic: Topic, retain: Bool = true) async throws {
        guard !payloads.isEmpty else { return }
        for payload in payloads { try checkSize(payload) }
        try await withConnection { link in try await link.outbox.append(payloads, to: topic, retain: retain) }
    }

    /// Publishes `text` (as UTF-8) to `topic` without waiting for confirmation (see ``publish(_:to:retain:)-(ByteBuffer,_,_)``).
    public func publish(_ text: String, to topic: Topic, retain: Bool = true) async throws {
        try await publish(ByteBuffer(string: text), to: topic, retain: retain)
    }

    /// Publishes `payload` to `topic` and waits until the daemon accepted it.
    /// - Returns: the message's sequence number within its topic.
    @discardableResult
    public func publishAcknowledged(_ payload: ByteBuffer, to topic: Topic, retain: Bool = true) async throws -> UInt64 {
        try checkSize(payload)
        let frame = try await withConnection { link in try await link.outbox.appendAcknowledged(payload, to: topic, retain: retain) }
        if case .error(let error) = frame { throw NotifyClientError.refused(error) }
        guard case .ok(_, let sequence?) = frame else { throw unexpected(frame, for: "PUB ack") }
        return sequence
    }

    /// Publishes `text` (as UTF-8) to `topic` and waits until the daemon accepted it.
    @discardableResult
    public func publishAcknowledged(_ text: String, to topic: Topic, retain: Bool = true) async throws -> UInt64 {
        try await publishAcknowledged(ByteBuffer(string: text), to: topic, retain: retain)
    }

    /// Waits until the daemon has handled everything sent before, and throws the first error that a
    /// fire-and-forget ``publish(_:to:retain:)-(ByteBuffer,_,_)`` received since the last flush (saying how many
    /// were refused when more were).
    public func flush() async throws {
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
    /// daemon keeps the rest and `overflow` says what it does when that is full too (see ``OverflowPolicy``); what
    /// it drops is announced as ``SubscriptionEvent/dropped(_:)``. Subscriptions of one client share its
    /// connection: while one of them is full, the others wait too (take a client per independent consumer).
    /// The subscription ends when the sequence is no longer iterated (the daemon is told). When the connection is
    /// lost, a client that reconnects carries it over and resumes it (see ``connect(to:group:reconnectWithin:)``;
    /// with a daemon of protocol 3); one that does not ends it with the error.
    public func subscribe(
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
    package func subscribe(
        to patterns: [TopicPattern],
        latestFirst: Bool,
        gauge: SubscriptionGauge,
        sink: @escaping @Sendable (SubscriptionEvent) -> Void,
        finished: @escaping @Sendable ((any Error)?) -> Void
    ) async throws -> SubscriptionHandle {
        try await open(patterns, options: SubscribeOptions(latestFirst: latestFirst), gauge: gauge, output: .sink(yield: sink, finish: finished))
    }

    /// Makes a subscription whose events go to `output`; the handle ends it.
    private func open(
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
    public func history(of topic: Topic, count: Int? = nil) async throws -> [Delivery] {
        try requireResuming("reading a topic's history")
        return try await withConnection { link in
            let promise = link.channel.eventLoop.makePromise(of: [Delivery].self)
            let handler = link.handler
            link.channel.eventLoop.execute { handler.value.collect(.history(topic, count: count), into: promise) }
            return try await promise.futureResult.get()
        }
    }

    /// The buffered latest message of `topic`, or nil when nothing is buffered.
    public func latest(_ topic: Topic) async throws -> Delivery? {
        let frame = try await exchange(.latest(topic), notFoundIsNil: true)
        switch frame {
        case .latest(_, let delivery): return delivery
        case nil: return nil
        case let other?: throw unexpected(other, for: "LATEST")
        }
    }

    /// Forgets the buffered message of `topic` without sending anything.
    public func clear(_ topic: Topic) async throws {
        let frame = try await exchange(.clear(topic))
        guard case .ok = frame else { throw unexpected(frame, for: "CLEAR") }
    }

    // MARK: - Introspection

    /// The topics the daemon knows, all or those matching `pattern`, in name order.
    public func topics(matching pattern: TopicPattern? = nil) async throws -> [TopicInfo] {
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
    public func stats() async throws -> ServerStats {
        let frame = try await exchange(.stats)
        guard case .stats(_, let stats) = frame else { throw unexpected(frame, for: "STATS") }
        return stats
    }

    /// Whether this client receives its own publishes (``setEcho(_:)``; yes unless told otherwise).
    public var receivesOwnPublishes: Bool { echo.withLockedValue { $0 } }

    /// Whether this connection receives its own publishes (it does unless told otherwise).
    public func setEcho(_ enabled: Bool) async throws {
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

    // MARK: - Internals

    private func exchange(_ command: Command) async throws -> ServerFrame {
        // Without notFoundIsNil the result is never nil.
        try await exchange(command, notFoundIsNil: false)!
    }

    private func exchange(_ command: Command, notFoundIsNil: Bool) async throws -> ServerFrame? {
        try await withConnection { link in try await self.exchange(command, notFoundIsNil: notFoundIsNil, on: link) }
    }

    private func exchange(_ command: Command, on link: Link) async throws -> ServerFrame {
        try await exchange(command, notFoundIsNil: false, on: link)!
    }

    private func exchange(_ command: Command, notFoundIsNil: Bool, on link: Link) async throws -> ServerFrame? {
        let reply = link.channel.eventLoop.makePromise(of: ServerFrame.self)
        let handler = link.handler
        link.channel.eventLoop.execute { handler.value.send(command, reply: reply, written: nil) }
        let frame = try await reply.futureResult.get()
        if case .error(let error) = frame {
            if notFoundIsNil && error.code == .notFound { return nil }
            throw NotifyClientError.refused(error)
        }
        return frame
    }

    // MARK: - Reconnecting

    /// Runs `body` on the connection; when that was lost, on a new one, and once more when it is lost under `body`.
    private func withConnection<Result: Sendable>(_ body: (Link) async throws -> Result) async throws -> Result {
        let link = try await current()
        do {
            return try await body(link)
        } catch let error as NotifyClientError where Self.isLostConnection(error) && reconnectWithin != nil {
            guard !isClosed.withLockedValue({ $0 }) else { throw error }
            return try await body(reconnect(replacing: link))
        }
    }

    /// Whether `error` says the connection is gone, or going: a request the daemon refused as `unavailable` (it is
    /// shutting down) was not carried out, and is made again on the next connection.
    private static func isLostConnection(_ error: NotifyClientError) -> Bool {
        error.kind == .connectionClosed || error.kind == .unreachable || error.refusal?.code == .unavailable
    }

    /// The connection to use: the one there is, or, when it was lost and the client reconnects, a new one.
    private func current() async throws -> Link {
        let link = self.link.withLockedValue { $0 }
        guard reconnectWithin != nil, !link.channel.isActive, !isClosed.withLockedValue({ $0 }) else { return link }
        return try await reconnect(replacing: link)
    }

    /// A new connection in place of `lost`: made once for all the calls that need it, backing off from 50 ms to 2 s
    /// between attempts (``ReconnectBackoff``), for up to ``reconnectWithin``.
    private func reconnect(replacing lost: Link) async throws -> Link {
        let current = link.withLockedValue { $0 }
        if current.channel !== lost.channel { return current }
        let task = reconnecting.withLockedValue { task -> Task<Link, any Error> in
            if let task { return task }
            let made = Task { [weak self, socketPath, group, echo, reconnectWithin, backoff, publishBuffer] in
                let deadline = ContinuousClock.now + (reconnectWithin ?? .zero)
                // A connection lost soon after it was made is not tried again at once (but within the window).
                if let pause = backoff.withLockedValue({ $0.lost(after: ContinuousClock.now - lost.madeAt) }) {
                    try await Task.sleep(for: min(pause, deadline - ContinuousClock.now))
                }
                while true {
                    do {
                        let link = try await NotifyClient.open(socketPath, group: group, publishBuffer: publishBuffer)
                        if !echo.withLockedValue({ $0 }) {
                            let reply = link.channel.eventLoop.makePromise(of: ServerFrame.self)
                            let handler = link.handler
                            link.channel.eventLoop.execute { handler.value.send(.setEcho(false), reply: reply, written: nil) }
                            _ = try await reply.futureResult.get()
                        }
                        try await self?.carrySubscriptions(from: link)
                        // What the lost connection had not written goes first on this one.
                        let lostHandler = lost.handler
                        if let left = try? await lost.channel.eventLoop.submit({ lostHandler.value.takeLeftoverPublishes() }).get() {
                            link.outbox.prepend(left)
                        }
                        return link
                    } catch let error as NotifyClientError where NotifyClient.isLostConnection(error) {
                        let pause = backoff.withLockedValue { $0.pause() }
                        guard ContinuousClock.now + pause < deadline else {
                            throw NotifyClientError(
                                .unreachable,
                                "the connection to the daemon was lost and it did not come back within \(reconnectWithin ?? .zero): \(error.message)"
                            )
                        }
                        try await Task.sleep(for: pause)
                    }
                }
            }
            task = made
            return made
        }
        defer { reconnecting.withLockedValue { if $0 == task { $0 = nil } } }
        let made = try await task.value
        return link.withLockedValue { link in
            if link.channel === lost.channel { link = made }
            return link
        }
    }

    /// What the current connection's outbox holds, for tests.
    var publishOutboxHeld: (pending: Int, inChannel: Int, waiting: Int) {
        link.withLockedValue { $0 }.outbox.held
    }

    /// Refuses, before sending, what a daemon older than protocol 3 would answer `ERR malformed`.
    private func requireResuming(_ what: String) throws {
        guard greeting.version < ServerGreeting.resumingVersion else { return }
        throw NotifyClientError(
            .invalidInput,
            "this notifyd speaks protocol \(greeting.version); \(what) needs protocol \(ServerGreeting.resumingVersion): upgrade notifyd"
        )
    }

    private func checkSize(_ payload: ByteBuffer) throws {
        if payload.readableBytes > greeting.limits.maxPayload {
            throw NotifyClientError.payloadTooLarge(payload.readableBytes, limit: greeting.limits.maxPayload)
        }
    }

    private func unexpected(_ frame: ServerFrame, for request: String) -> NotifyClientError {
        NotifyClientError.unexpected(frame, for: request)
    }
}
