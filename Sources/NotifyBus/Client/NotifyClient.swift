public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
import NotifyProtocol
import NotifySystem

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
/// upgrade), the client connects again by itself on its next call (see ``connect(to:group:reconnectWithin:publishBuffer:)``).
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

    let link: NIOLockedValueBox<Link>
    let group: any EventLoopGroup
    /// How long a call waits for the daemon to come back; nil when the client does not reconnect.
    let reconnectWithin: Duration?
    /// The connection being made to replace a lost one, which every call that needs it waits for.
    let reconnecting = NIOLockedValueBox<Task<Link, any Error>?>(nil)
    /// The pauses between attempts to reconnect, kept across connections (see ``ReconnectBackoff``).
    let backoff = NIOLockedValueBox(ReconnectBackoff())
    /// What ``setEcho(_:)`` asked for last, for a new connection to be told too.
    let echo = NIOLockedValueBox(true)
    let isClosed = NIOLockedValueBox(false)
    /// The bound on each connection's ``PublishOutbox``.
    let publishBuffer: Int

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
    /// ``/NotifyProtocol/OverflowPolicy/disconnect`` that the daemon closed for falling behind ends instead, as it asked). The first
    /// connection is not retried: a daemon that is not there is an error at once.
    /// - Parameters:
    ///   - socketPath: the socket; nil resolves it as ``/NotifyProtocol/SocketPath/resolveForClient(explicit:environment:uid:)`` says.
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
    func carrySubscriptions(from link: Link) async throws {
        let handler = link.handler
        try await link.channel.eventLoop.submit { [weak self] in
            handler.value.handOver = { subscriptions, _ in self?.resume(subscriptions) }
        }.get()
    }

    /// Resumes `subscriptions`, handed over by a lost connection, on the next one: as long as they are iterated,
    /// they wait for the daemon to come back, however long that takes.
    func resume(_ subscriptions: [ClientChannelHandler.LocalSubscription]) {
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
    static func open(_ path: String, group: any EventLoopGroup, publishBuffer: Int) async throws -> Link {
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

    // MARK: - Internals

    nonisolated(nonsending) func exchange(_ command: Command) async throws -> ServerFrame {
        // Without notFoundIsNil the result is never nil.
        try await exchange(command, notFoundIsNil: false)!
    }

    nonisolated(nonsending) func exchange(_ command: Command, notFoundIsNil: Bool) async throws -> ServerFrame? {
        try await withConnection { link in try await self.exchange(command, notFoundIsNil: notFoundIsNil, on: link) }
    }

    nonisolated(nonsending) func exchange(_ command: Command, on link: Link) async throws -> ServerFrame {
        try await exchange(command, notFoundIsNil: false, on: link)!
    }

    nonisolated(nonsending) func exchange(_ command: Command, notFoundIsNil: Bool, on link: Link) async throws -> ServerFrame? {
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
}
