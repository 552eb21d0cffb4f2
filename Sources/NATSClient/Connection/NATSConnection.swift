public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix

/// One connection to a NATS server, with what the bridge needs of it: publish (with headers), subscribe, and flush.
/// It does not reconnect: the bridge owns that policy (a server list, backoff, an outbox).
///
/// TLS (``NATSTLSSettings``) starts after the server's `INFO`, as NATS servers expect, and every login nats-server
/// takes from a client is there (``NATSCredentials``).
public final class NATSConnection: Sendable {
    /// The server's `INFO`, as the JSON it sent on connect.
    public let serverInfo: String
    /// Whether the connection runs over TLS.
    public let usesTLS: Bool
    /// The event loop the connection runs on; the methods marked "on the event loop" are called there only.
    public var eventLoop: any EventLoop { channel.eventLoop }
    private let channel: any Channel
    private let handler: NIOLoopBound<NATSChannelHandler>
    private let nextSID = NIOLockedValueBox(1)

    private init(serverInfo: String, usesTLS: Bool, channel: any Channel, handler: NIOLoopBound<NATSChannelHandler>) {
        self.serverInfo = serverInfo
        self.usesTLS = usesTLS
        self.channel = channel
        self.handler = handler
    }

    deinit {
        channel.close(promise: nil)
    }

    /// Connects to `host`:`port`, reads the server's `INFO`, starts TLS when `tls` or the server asks for it, sends
    /// `CONNECT` naming the client `name` with its `credentials`, and waits for the server to have handled it (a
    /// `PING` answered). With `echo` false, the server never delivers this connection's own publishes to its
    /// subscriptions. A refused login fails with an error whose ``NATSError/isAuthorizationFailure`` is true.
    public static func connect(
        host: String,
        port: Int,
        name: String,
        echo: Bool = true,
        tls: NATSTLSSettings = NATSTLSSettings(),
        credentials: NATSCredentials? = nil,
        timeout: TimeAmount = .seconds(5),
        group: (any EventLoopGroup)? = nil
    ) async throws -> NATSConnection {
        let group = group ?? MultiThreadedEventLoopGroup.singleton
        let added = NIOLockedValueBox<(NIOLoopBound<NATSChannelHandler>, EventLoopFuture<String>)?>(nil)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        // INFO lists a cluster's servers, so it may be longer than a client's 4 KiB lines.
                        let handler = NATSChannelHandler(
                            info: channel.eventLoop.makePromise(of: String.self),
                            decoder: NATSServerDecoder(maxControlLine: 64 << 10)
                        )
                        let info = handler.infoFuture
                        try channel.pipeline.syncOperations.addHandler(handler)
                        added.withLockedValue { $0 = (NIOLoopBound(handler, eventLoop: channel.eventLoop), info) }
                    }
                }
                .connect(host: host, port: port)
                .get()
        } catch {
            throw NATSError("cannot connect to the NATS server at \(host):\(port): \(error)")
        }
        guard let (handler, info) = added.withLockedValue({ $0 }) else {
            channel.close(promise: nil)
            throw NATSError("the connection to \(host):\(port) was set up without its handler")
        }
        // A peer that takes the connection and says nothing (not a NATS server, or one that is stuck) is given up;
        // so is a TLS handshake and login that take longer. Noted, so that the close is said to be this side's.
        let gaveUp = NIOLockedValueBox(false)
        let silence = channel.eventLoop.scheduleTask(in: timeout) {
            gaveUp.withLockedValue { $0 = true }
            channel.close(promise: nil)
        }
        defer { silence.cancel() }
        let serverInfo: String
        do {
            serverInfo = try await info.get()
        } catch {
            throw NATSError("\(host):\(port) sent no NATS INFO within \(timeout.nanoseconds / 1_000_000_000) s: \(error)")
        }
        let serverOffersTLS = JSONScan.boolean("tls_required", in: serverInfo) == true || JSONScan.boolean("tls_available", in: serverInfo) == true
        let usesTLS = tls.isRequired || JSONScan.boolean("tls_required", in: serverInfo) == true
        let connection = NATSConnection(serverInfo: serverInfo, usesTLS: usesTLS, channel: channel, handler: handler)
        /// Why the connection failed when this side's timer closed it: not the server's doing.
        func gaveUpError() -> NATSError? {
            guard gaveUp.withLockedValue({ $0 }) else { return nil }
            return NATSError("\(host):\(port) did not finish \(usesTLS ? "the TLS handshake and " : "")the login within \(timeout.nanoseconds / 1_000_000_000) s: given up")
        }
        if usesTLS {
            guard serverOffersTLS else {
                channel.close(promise: nil)
                throw NATSError("\(host):\(port) offers no TLS, and \(tls.requiredBecause): not connecting in plain text")
            }
            do {
                try await channel.eventLoop.submit {
                    try channel.pipeline.syncOperations.addHandler(try tls.makeHandler(host: host), position: .first)
                }.get()
            } catch {
                if let gaveUp = gaveUpError() { throw gaveUp }
                // The server may close before TLS is set up (its handshake timeout on a busy host): say so, by name.
                channel.close(promise: nil)
                throw error as? NATSError ?? NATSError("\(host):\(port) closed the connection before TLS could start: \(error)")
            }
        }
        var options = #"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1,"lang":"swift","version":"0.1","echo":\#(echo),"name":\#(JSONScan.quoted(name)),"tls_required":\#(tls.isRequired)"#
        do {
            options += try credentials?.connectFields(nonce: JSONScan.string("nonce", in: serverInfo)) ?? ""
        } catch {
            channel.close(promise: nil)
            throw error
        }
        options += "}"
        do {
            try await connection.send([.connect(options)])
            try await connection.flush()  // within `timeout` too: the scheduled close fails it
        } catch {
            if let gaveUp = gaveUpError() { throw gaveUp }
            // A write fails only with "closed"; the handler heard why (TLS refused, a login refused).
            let reason = try? await channel.eventLoop.submit { handler.value.failureReason }.get()
            throw reason ?? NATSError("\(host):\(port): \(error)")
        }
        return connection
    }

    /// Publishes `payload` to `subject`, with `headers` if given; returns once the bytes are written.
    public func publish(_ payload: ByteBuffer, to subject: String, headers: NATSHeaders? = nil, replyTo: String? = nil) async throws {
        try await send([.publish(subject: subject, replyTo: replyTo, headers: headers, payload: payload)])
    }

    /// Waits until the server has handled everything sent before (a `PING` answered by its `PONG`).
    public func flush() async throws {
        let pong = channel.eventLoop.makePromise(of: Void.self)
        let handler = self.handler
        channel.eventLoop.execute { handler.value.ping(pong) }
        try await pong.futureResult.get()
    }

    /// Subscribes to `subject` (wildcards `*` and `>` allowed) and returns its messages as they come; the
    /// subscription ends when the sequence is no longer iterated. At most `bufferLimit` messages wait for a consumer
    /// that falls behind; the oldest go first.
    public func subscribe(to subject: String, bufferLimit: Int = 65_536) async throws -> AsyncThrowingStream<NATSMessage, any Error> {
        let sid = String(nextSID.withLockedValue { sid in
            defer { sid += 1 }
            return sid
        })
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: NATSMessage.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let handler = self.handler
        let eventLoop = channel.eventLoop
        continuation.onTermination = { _ in eventLoop.execute { handler.value.removeSubscription(sid) } }
        try await eventLoop.submit { handler.value.addSubscription(sid, .stream(continuation)) }.get()
        try await send([.subscribe(subject: subject, queueGroup: nil, sid: sid)])
        try await flush()
        return stream
    }

    /// Sends `payload` to `subject` with a fresh reply subject and returns the first reply; fails after `timeout`,
    /// or at once when nobody listens on `subject` (the server's no-responders status, 503).
    public func request(_ payload: ByteBuffer, to subject: String, timeout: TimeAmount = .seconds(5)) async throws -> NATSMessage {
        let eventLoop = channel.eventLoop
        let reply = eventLoop.makePromise(of: NATSMessage.self)
        let handler = self.handler
        let sid = String(nextSID.withLockedValue { sid in
            defer { sid += 1 }
            return sid
        })
        eventLoop.execute {
            let inbox = handler.value.requests
            if inbox.prefix == nil {
                inbox.prefix = "_INBOX.\(UInt64.random(in: 1...UInt64.max))"
                handler.value.addSubscription(sid, .callback { message in inbox.answer(message) })
                handler.value.send([.subscribe(subject: inbox.prefix! + ".*", queueGroup: nil, sid: sid)], written: nil)
            }
            let token = inbox.register(reply)
            let timer = eventLoop.assumeIsolated().scheduleTask(in: timeout) {
                inbox.fail(token, NATSError("no reply to the request on \(subject) within \(timeout.nanoseconds / 1_000_000) ms"))
            }
            reply.futureResult.whenComplete { _ in timer.cancel() }
            handler.value.send(
                [.publish(subject: subject, replyTo: inbox.prefix! + "." + token, headers: nil, payload: payload)],
                written: nil
            )
        }
        let message = try await reply.futureResult.get()
        if message.headers?.status == 503 {
            throw NATSError("no responders for the request on \(subject)")
        }
        return message
    }

    // MARK: On the event loop, for a caller that lives there (the bridge): no task switch per message.

    /// Subscribes to `subject` and calls `receive` on the event loop with each of its messages; returns the
    /// subscription's id, for ``unsubscribe(_:)``. On the event loop.
    @discardableResult
    public func subscribe(to subject: String, receive: @escaping (NATSMessage) -> Void) -> String {
        channel.eventLoop.preconditionInEventLoop()
        let sid = String(nextSID.withLockedValue { sid in
            defer { sid += 1 }
            return sid
        })
        handler.value.addSubscription(sid, .callback(receive))
        handler.value.send([.subscribe(subject: subject, queueGroup: nil, sid: sid)], written: nil)
        return sid
    }

    /// Ends the subscription `sid` of ``subscribe(to:receive:)``. On the event loop.
    public func unsubscribe(_ sid: String) {
        handler.value.removeSubscription(sid)
    }

    /// Writes `operations` and flushes them, without waiting for anything. On the event loop.
    public func sendNow(_ operations: [NATSClientOperation]) {
        handler.value.send(operations, written: nil)
    }

    /// Queues `bytes` (operations encoded with ``NIOCore/ByteBuffer/writeNATSOperation(_:)``) without sending them
    /// yet. On the event loop.
    public func write(_ bytes: ByteBuffer) {
        handler.value.write(bytes)
    }

    /// Sends what was written, without a `PING`: for writes confirmed otherwise (JetStream acknowledgements). On the
    /// event loop.
    public func flushWritten() {
        handler.value.flushWritten()
    }

    /// Sends what was written and a `PING`; `confirmed` succeeds when the server has handled all of it. On the event
    /// loop.
    public func flush(confirmed: EventLoopPromise<Void>) {
        handler.value.flush(confirmed: confirmed)
    }

    /// Whether the connection takes more writes now (its write buffer is under its high-water mark). On the event loop.
    public var isWritable: Bool { handler.value.isWritable }

    /// Called on the event loop when the connection takes writes again. On the event loop.
    public func setOnWritable(_ writable: @escaping () -> Void) {
        handler.value.onWritable = writable
    }

    /// Called once on the event loop when the connection is gone, with why; at once if it is gone already. On the
    /// event loop.
    public func setOnClosed(_ closed: @escaping (NATSError) -> Void) {
        if handler.value.isOpen {
            handler.value.onClosed = closed
        } else {
            closed(NATSError("the connection to the NATS server is closed"))
        }
    }

    /// Closes the connection now, without waiting: its owner hears of it through ``setOnClosed(_:)``. On the event
    /// loop.
    public func closeNow() {
        handler.value.close()
    }

    /// Closes the connection.
    public func close() async {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.close() }
        try? await channel.closeFuture.get()
    }

    private func send(_ operations: [NATSClientOperation]) async throws {
        let written = channel.eventLoop.makePromise(of: Void.self)
        let handler = self.handler
        channel.eventLoop.execute { handler.value.send(operations, written: written) }
        try await written.futureResult.get()
    }
}

/// The replies a connection waits for: one wildcard subscription (`_INBOX.<random>.*`) serves every request, each
/// told apart by the last token of its reply subject.
///
/// Tokens are random, not counted: another client of the server that learns the inbox (a reply it could read) must
/// not be able to name the next request's reply subject and answer it first (a forged JetStream reply could make the
/// fleet service recreate its consumer past the stream's end). NATS's permissions on `_INBOX.>` and `$JS.API.>` are
/// the real bound (docs/federation.md).
final class RequestInbox {
    var prefix: String?
    private var waiting: [String: EventLoopPromise<NATSMessage>] = [:]

    func register(_ promise: EventLoopPromise<NATSMessage>) -> String {
        var token: String
        repeat {
            token = String(UInt64.random(in: 1...UInt64.max), radix: 36)
        } while waiting[token] != nil
        waiting[token] = promise
        return token
    }

    func answer(_ message: NATSMessage) {
        guard let dot = message.subject.utf8.lastIndex(of: UInt8(ascii: ".")) else { return }
        let token = String(message.subject[message.subject.utf8.index(after: dot)...])
        waiting.removeValue(forKey: token)?.succeed(message)
    }

    func fail(_ token: String, _ error: NATSError) {
        waiting.removeValue(forKey: token)?.fail(error)
    }

    /// The connection is gone: no reply will come.
    func failAll(_ error: NATSError) {
        let all = waiting.values
        waiting.removeAll()
        for promise in all { promise.fail(error) }
    }
}
