import NIOCore

/// The client's end of one connection to a NATS server, on its event loop: answers the server's `PING`s, hands each
/// message to its subscription, and completes a flush when the `PONG` for its `PING` comes (the server answers
/// them in order).
final class NATSChannelHandler: ChannelInboundHandler {
    typealias InboundIn = NATSServerOperation
    typealias OutboundOut = ByteBuffer

    private let info: EventLoopPromise<String>
    private var context: ChannelHandlerContext?
    private var pongs: [EventLoopPromise<Void>] = []
    private var subscriptions: [String: AsyncThrowingStream<NATSMessage, any Error>.Continuation] = [:]
    private var failure: NATSError?

    init(info: EventLoopPromise<String>) {
        self.info = info
    }

    var infoFuture: EventLoopFuture<String> { info.futureResult }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// Writes `operations` in one write; `written` completes once the bytes are handed to the kernel.
    func send(_ operations: [NATSClientOperation], written: EventLoopPromise<Void>?) {
        guard let context, failure == nil else {
            written?.fail(failure ?? NATSError("the connection to the NATS server is closed"))
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 128)
        for operation in operations { buffer.writeNATSOperation(operation) }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: written)
    }

    /// Sends a `PING`; `pong` completes when its `PONG` comes, so everything sent before it was handled.
    func ping(_ pong: EventLoopPromise<Void>) {
        guard failure == nil else {
            pong.fail(failure!)
            return
        }
        pongs.append(pong)
        send([.ping], written: nil)
    }

    func addSubscription(_ sid: String, _ continuation: AsyncThrowingStream<NATSMessage, any Error>.Continuation) {
        subscriptions[sid] = continuation
    }

    func removeSubscription(_ sid: String) {
        guard subscriptions.removeValue(forKey: sid) != nil else { return }
        send([.unsubscribe(sid: sid, maxMessages: nil)], written: nil)
    }

    func close() {
        context?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .info(let json):
            info.succeed(json)
        case .ping:
            send([.pong], written: nil)
        case .pong:
            if !pongs.isEmpty { pongs.removeFirst().succeed(()) }
        case .ok:
            break
        case .message(let message):
            subscriptions[message.sid]?.yield(message)
        case .error(let text):
            // Most -ERRs close the connection; the permission ones do not, and are reported when it closes anyway.
            failure = failure ?? NATSError("the NATS server said: \(text)")
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failure = failure ?? NATSError("the connection to the NATS server failed: \(error)")
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let error = failure ?? NATSError("the NATS server closed the connection")
        failure = error
        info.fail(error)
        for pong in pongs { pong.fail(error) }
        pongs.removeAll()
        for continuation in subscriptions.values { continuation.finish(throwing: error) }
        subscriptions.removeAll()
        self.context = nil
        context.fireChannelInactive()
    }
}

/// What went wrong with a NATS server: unreachable, refused, closed.
public struct NATSError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
