public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix

/// One connection to a NATS server, with what the bridge needs of it: publish (with headers), subscribe, and flush.
/// It does not reconnect: the bridge owns that policy (a server list, backoff, an outbox).
///
/// TLS and credentials are not there yet; they fit in as a handler added before the codec (NIOSSL) and the fields
/// of `CONNECT` (`user`, `pass`, `auth_token`, `jwt` and `sig` from the server's nonce) once the server's `INFO` asks.
public final class NATSConnection: Sendable {
    /// The server's `INFO`, as the JSON it sent on connect.
    public let serverInfo: String
    private let channel: any Channel
    private let handler: NIOLoopBound<NATSChannelHandler>
    private let nextSID = NIOLockedValueBox(1)

    private init(serverInfo: String, channel: any Channel, handler: NIOLoopBound<NATSChannelHandler>) {
        self.serverInfo = serverInfo
        self.channel = channel
        self.handler = handler
    }

    deinit {
        channel.close(promise: nil)
    }

    /// Connects to `host`:`port`, reads the server's `INFO`, sends `CONNECT` naming the client `name`, and waits
    /// for the server to have handled it (a `PING` answered).
    public static func connect(
        host: String,
        port: Int,
        name: String,
        group: (any EventLoopGroup)? = nil
    ) async throws -> NATSConnection {
        let group = group ?? MultiThreadedEventLoopGroup.singleton
        let added = NIOLockedValueBox<(NIOLoopBound<NATSChannelHandler>, EventLoopFuture<String>)?>(nil)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = NATSChannelHandler(info: channel.eventLoop.makePromise(of: String.self))
                        let info = handler.infoFuture
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(NATSServerDecoder()))
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
        let connection = NATSConnection(serverInfo: try await info.get(), channel: channel, handler: handler)
        let options = #"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1,"lang":"swift","version":"0.1","name":"\#(name)"}"#
        try await connection.send([.connect(options)])
        try await connection.flush()
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
        try await eventLoop.submit { handler.value.addSubscription(sid, continuation) }.get()
        try await send([.subscribe(subject: subject, queueGroup: nil, sid: sid)])
        try await flush()
        return stream
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
